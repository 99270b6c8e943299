# promtool, Prometheus's rule checker, for the tests of the shipped rules
# (deploy/prometheus): `promtool check rules` and `promtool test rules`.
# Sourced by scripts/services.sh, which provides log, fail, as_root,
# apt_install and wait_for.
#
# Not a service: a binary. A promtool on PATH is used as it is; otherwise
# the Go module's (pinned below) is installed under .tools/promtool/VERSION/
# (gitignored), where the tests look for it (or set QUARANTINE_PROMTOOL).

PROMTOOL_VERSION=v0.316.0 # github.com/prometheus/prometheus, Prometheus 3.x

ensure_promtool() {
	local root dir
	root="$(cd "$SERVICES_DIR/../.." && pwd)"
	dir="$root/.tools/promtool/$PROMTOOL_VERSION"
	if [[ -x "$dir/promtool" ]]; then
		log "promtool ready ($dir/promtool)"
		return 0
	fi
	if command -v promtool >/dev/null 2>&1; then
		log "promtool ready ($(command -v promtool))"
		return 0
	fi
	if ! command -v go >/dev/null 2>&1; then
		fail "go is not installed: cannot install promtool"
		return 1
	fi
	mkdir -p "$dir" || { fail "cannot create $dir"; return 1; }
	log "installing promtool $PROMTOOL_VERSION into $dir"
	GOBIN="$dir" GOFLAGS=-buildvcs=false go install "github.com/prometheus/prometheus/cmd/promtool@$PROMTOOL_VERSION" ||
		{ fail "could not install promtool $PROMTOOL_VERSION"; return 1; }
	log "promtool ready ($dir/promtool)"
}
