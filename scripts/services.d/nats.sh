# NATS with JetStream on 127.0.0.1:4222 (monitor on 8222 when we start it).
# Sourced by scripts/services.sh, which provides log, fail, as_root,
# apt_install and wait_for. A server that already answers is never touched.
#
# Debian's nats-server (2.9) is preferred; when it cannot be installed, the
# version pinned in go.mod is built with `go install`. Tests read
# QUARANTINE_TEST_NATS_URL (default nats://127.0.0.1:4222); tests that kill
# the server embed their own.

NATS_HOST=127.0.0.1
NATS_PORT=4222
NATS_MONITOR_PORT=8222

# nats_js_ready asks the server for its JetStream account info over the
# plain client protocol and expects an answer without an error.
nats_js_ready() {
	local out
	out="$(timeout 3 bash -c '
		exec 3<>"/dev/tcp/$0/$1" || exit 1
		printf "CONNECT {\"verbose\":false,\"pedantic\":false}\r\nSUB _INBOX.services 1\r\nPUB \$JS.API.INFO _INBOX.services 0\r\n\r\nPING\r\n" >&3
		timeout 1 cat <&3
	' "$NATS_HOST" "$NATS_PORT" 2>/dev/null)" || true
	grep -q 'account_info_response' <<<"$out" && ! grep -q '"error"' <<<"$out"
}

nats_listening() { timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$NATS_HOST" "$NATS_PORT" 2>/dev/null; }

# nats_server_bin prints a nats-server binary, installing one if needed.
nats_server_bin() {
	local bin
	if bin="$(command -v nats-server)"; then
		echo "$bin"
		return 0
	fi
	log "installing nats-server (Debian nats-server)"
	if apt_install nats-server >&2 && bin="$(command -v nats-server)"; then
		echo "$bin"
		return 0
	fi
	log "Debian nats-server unavailable: building the version pinned in go.mod"
	local root version gobin
	root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
	version="$(cd "$root" && go list -m -f '{{.Version}}' github.com/nats-io/nats-server/v2 2>/dev/null)" || return 1
	gobin="$root/.cache/bin"
	mkdir -p "$gobin"
	GOBIN="$gobin" go install "github.com/nats-io/nats-server/v2@$version" >&2 || return 1
	echo "$gobin/nats-server"
}

ensure_nats() {
	if nats_js_ready; then
		log "nats ready on $NATS_HOST:$NATS_PORT (JetStream)"
		return 0
	fi
	if nats_listening; then
		log "a server listens on $NATS_HOST:$NATS_PORT: waiting for JetStream"
		if wait_for nats_js_ready; then
			log "nats ready on $NATS_HOST:$NATS_PORT (JetStream)"
			return 0
		fi
		fail "the server on $NATS_HOST:$NATS_PORT does not answer JetStream requests (started without -js?)"
		return 1
	fi
	local bin store logfile
	bin="$(nats_server_bin)" || { fail "could not install nats-server"; return 1; }
	if [[ "$(id -u)" -eq 0 ]]; then
		store=/var/lib/nats-server
		logfile=/var/log/nats-server.log
	else
		store="${XDG_STATE_HOME:-$HOME/.local/state}/quarantine/nats"
		logfile="$store/nats-server.log"
	fi
	mkdir -p "$store"
	log "starting nats-server ($("$bin" --version 2>/dev/null)) with JetStream in $store"
	local args=(-a "$NATS_HOST" -p "$NATS_PORT" -m "$NATS_MONITOR_PORT" -js -sd "$store" -l "$logfile")
	if command -v start-stop-daemon >/dev/null 2>&1; then
		start-stop-daemon --start --oknodo --background --make-pidfile --pidfile "$store/nats-server.pid" \
			--exec "$bin" -- "${args[@]}" ||
			log "start-stop-daemon failed"
		[[ -s "$store/nats-server.pid" ]] && record_started nats "$(cat "$store/nats-server.pid")"
	else
		nohup "$bin" "${args[@]}" >/dev/null 2>&1 &
		record_started nats "$!"
		disown || true
	fi
	if ! wait_for nats_js_ready; then
		fail "nats-server did not become ready on $NATS_HOST:$NATS_PORT (see $logfile)"
		return 1
	fi
	log "nats ready on $NATS_HOST:$NATS_PORT (JetStream)"
}
