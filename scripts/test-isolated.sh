#!/usr/bin/env bash
# test-isolated.sh (make test-isolated): prove that `make test` needs
# nothing of the machine's own services. It clones the committed HEAD
# into a fresh folder, fetches what the clone needs from the registries
# (Debian packages, Go modules, the npm tools, goaws and promtool), then
# runs `CI=true make test` in a network namespace of its own, with only
# its own loopback up and GOPROXY=off: there, none of the machine's
# services (PostgreSQL, RabbitMQ, NATS on their default ports) and no
# registry can be reached, so every service a test uses is the clone's
# private instance. Afterwards it stops those instances and checks that
# no process of the clone is left.
#
#   scripts/test-isolated.sh [MAKE-TARGET...]   (default: test)
#
# Needs root (unshare -n) and iproute2. QUARANTINE_ISOLATED_DIR chooses the
# folder of the clone (default: a new one under /tmp, removed on success).
set -euo pipefail

log() { printf 'test-isolated: %s\n' "$*" >&2; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(test)

if [[ "$(id -u)" -ne 0 ]]; then
	log "needs root (unshare -n); run it as root or with sudo"
	exit 2
fi
command -v ip >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -q iproute2 >&2
command -v unshare >/dev/null 2>&1 || { log "unshare (util-linux) is missing"; exit 2; }

if [[ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ]]; then
	log "WARNING: uncommitted changes are not tested: the clone holds the committed HEAD only"
fi
work="${QUARANTINE_ISOLATED_DIR:-$(mktemp -d /tmp/quarantine-isolated.XXXXXX)}"
clone="$work/quarantine"
rm -rf "$clone"
git clone -q "$ROOT" "$clone"
chmod 755 "$work"
log "fresh clone of $(git -C "$clone" rev-parse --short HEAD) in $clone"

# Outside: everything that comes from a registry.
(
	cd "$clone"
	export GOFLAGS=-buildvcs=false
	log "fetching Go modules, packages and tools (outside the namespace)"
	go mod download
	(cd scripts/goaws && go mod download)
	go test -count=1 -run '^$' ./... >/dev/null # compiles every test: every module it needs is then cached
	./scripts/services.sh install
	./scripts/node-tools.sh
	(cd examples/node && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
)

# Inside: a namespace whose loopback is its own.
log "running make ${targets[*]} in a private network namespace"
status=0
unshare -n env -C "$clone" bash -c '
	set -u
	ip link set lo up
	readlink /proc/self/ns/net >"$0"
	for p in 5432 5672 4222; do
		if timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$p" 2>/dev/null; then
			echo "test-isolated: 127.0.0.1:$p answers inside the namespace: not isolated" >&2
			exit 3
		fi
	done
	rc=0
	GOPROXY=off GOFLAGS=-buildvcs=false CI=true make "$@" || rc=$?
	./scripts/services.sh stop >&2 || rc=1
	exit "$rc"
' "$work/netns" "${targets[@]}" || status=$?

# Nothing started in the namespace may outlive the stop: every process
# of the run (servers, nodes, epmd, test binaries) lives in it.
ns="$(cat "$work/netns" 2>/dev/null || true)"
left=""
if [[ -n "$ns" ]]; then
	for d in /proc/[0-9]*; do
		if [[ "$(readlink "$d/ns/net" 2>/dev/null)" == "$ns" ]]; then
			left+="$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null | cut -c1-200) (pid ${d#/proc/})"$'\n'
		fi
	done
fi
if [[ -n "$left" ]]; then
	log "ERROR: processes of the run are left after services.sh stop:"
	printf '%s' "$left" >&2
	status=1
fi
if [[ "$status" -eq 0 ]]; then
	log "passed: make ${targets[*]} needed none of the machine's services"
	[[ -n "${QUARANTINE_ISOLATED_DIR:-}" ]] || rm -rf "$work"
else
	log "FAILED (status $status); the clone is kept in $clone"
fi
exit "$status"
