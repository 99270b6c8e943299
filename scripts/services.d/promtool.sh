# promtool, Prometheus's rule checker, for the tests of the shipped rules
# (deploy/prometheus): `promtool check rules` and `promtool test rules`.
# Sourced by scripts/services.sh.
#
# A binary: the Go module's, at the version pinned below, installed with
# `go install` under .tools/promtool/VERSION/ (never the one Debian's
# prometheus package puts on PATH, an older release). Tests read
# QUARANTINE_PROMTOOL.

PROMTOOL_VERSION=v0.316.0 # github.com/prometheus/prometheus, Prometheus 3.x

promtool_bin() { echo "$ROOT/.tools/promtool/$PROMTOOL_VERSION/promtool"; }

install_promtool() {
	local bin
	bin="$(promtool_bin)"
	[[ -x "$bin" ]] && return 0
	command -v go >/dev/null 2>&1 || { log "go is not installed: cannot install promtool"; return 1; }
	log "installing promtool $PROMTOOL_VERSION into ${bin%/*} (go install)"
	mkdir -p "${bin%/*}"
	GOBIN="${bin%/*}" GOFLAGS=-buildvcs=false go install "github.com/prometheus/prometheus/cmd/promtool@$PROMTOOL_VERSION" >&2
}

ensure_promtool() {
	install_promtool || { fail "could not install promtool $PROMTOOL_VERSION"; return 1; }
	binary promtool "QUARANTINE_PROMTOOL=$(promtool_bin)"
	log "promtool ready ($(promtool_bin))"
}
