# NATS with JetStream (Debian's nats-server; when it cannot be installed,
# the version pinned in go.mod, built with `go install` into .tools/bin).
# Sourced by scripts/services.sh. Its store, log and pid file are in the
# instance folder. Tests read QUARANTINE_TEST_NATS_URL; tests that kill the
# server embed their own.

nats_server_bin() {
	local gobin="$ROOT/.tools/bin"
	if command -v nats-server >/dev/null 2>&1; then
		command -v nats-server
	elif [[ -x "$gobin/nats-server" ]]; then
		echo "$gobin/nats-server"
	else
		return 1
	fi
}

install_nats() {
	nats_server_bin >/dev/null && return 0
	log "installing nats-server (Debian nats-server)"
	apt_install nats-server && nats_server_bin >/dev/null && return 0
	log "Debian nats-server unavailable: building the version pinned in go.mod"
	local version
	version="$(cd "$ROOT" && go list -m -f '{{.Version}}' github.com/nats-io/nats-server/v2)" || return 1
	mkdir -p "$ROOT/.tools/bin"
	GOBIN="$ROOT/.tools/bin" GOFLAGS=-buildvcs=false go install "github.com/nats-io/nats-server/v2@$version" >&2
}

# nats_js_ready PORT asks the server for its JetStream account info over
# the plain client protocol and expects an answer without an error.
nats_js_ready() {
	local out
	out="$(timeout 3 bash -c '
		exec 3<>"/dev/tcp/127.0.0.1/$0" || exit 1
		printf "CONNECT {\"verbose\":false,\"pedantic\":false}\r\nSUB _INBOX.services 1\r\nPUB \$JS.API.INFO _INBOX.services 0\r\n\r\nPING\r\n" >&3
		timeout 1 cat <&3
	' "$1" 2>/dev/null)" || true
	grep -q 'account_info_response' <<<"$out" && ! grep -q '"error"' <<<"$out"
}

ensure_nats() {
	local port="${QUARANTINE_NATS_PORT:-24222}" inst bin
	inst="$(instance nats "$port")"
	install_nats || { fail "could not install nats-server"; return 1; }
	bin="$(nats_server_bin)"
	if listening "$port"; then
		reuse nats "$port" "$inst" QUARANTINE_NATS_PORT nats_js_ready "$port" || return 1
	else
		mkdir -p "$inst/data"
		log "starting nats-server ($("$bin" --version 2>/dev/null)) with JetStream on 127.0.0.1:$port"
		spawn "$inst" "$inst/nats-server.log" "$bin" -a 127.0.0.1 -p "$port" -js -sd "$inst/data"
		wait_for nats_js_ready "$port" || { fail "nats-server is not ready on 127.0.0.1:$port (see $inst/nats-server.log)"; return 1; }
		log "nats ready on 127.0.0.1:$port (JetStream)"
	fi
	write_env "$inst" "QUARANTINE_TEST_NATS_URL=nats://127.0.0.1:$port"
}
