# goaws, the Amazon SQS emulator (Go module github.com/Admiral-Piett/goaws,
# pinned in scripts/goaws/go.mod). Sourced by scripts/services.sh.
#
# goaws's own main listens on 0.0.0.0 whatever its config says, so the
# binary is built from scripts/goaws (the same server, bound to the
# config's Host) into .tools/goaws/VERSION/. It keeps its state in memory
# only. Tests read QUARANTINE_TEST_SQS_ENDPOINT.

GOAWS_VERSION=v0.4.5

goaws_bin() { echo "$ROOT/.tools/goaws/$GOAWS_VERSION/goaws"; } # named goaws, so that ps and benchmarks find it

install_goaws() {
	local bin src="$ROOT/scripts/goaws"
	bin="$(goaws_bin)"
	if [[ -x "$bin" && ! "$src/main.go" -nt "$bin" && ! "$src/go.mod" -nt "$bin" ]]; then
		return 0
	fi
	command -v go >/dev/null 2>&1 || { log "go is not installed: cannot build goaws"; return 1; }
	log "building goaws $GOAWS_VERSION (bound to its config's Host) into ${bin%/*}"
	mkdir -p "${bin%/*}"
	(cd "$src" && GOFLAGS=-buildvcs=false go build -o "$bin" .)
}

goaws_ready() { curl -fsS "http://127.0.0.1:$1/health" >/dev/null 2>&1; }

ensure_goaws() {
	local port="${QUARANTINE_GOAWS_PORT:-${GOAWS_PORT:-24100}}" inst
	inst="$(instance goaws "$port")"
	install_goaws || { fail "could not build goaws $GOAWS_VERSION"; return 1; }
	if listening "$port"; then
		reuse goaws "$port" "$inst" QUARANTINE_GOAWS_PORT goaws_ready "$port" || return 1
	else
		# Loopback, no queues (its bundled default config points at an
		# outside URL).
		cat >"$inst/goaws.yaml" <<YAML
Local:
  Host: 127.0.0.1
  Port: $port
  Region: us-east-1
  AccountId: "100010001000"
  LogToFile: false
  QueueAttributeDefaults:
    VisibilityTimeout: 30
    ReceiveMessageWaitTimeSeconds: 0
    MaximumMessageSize: 262144
  Queues: []
  Topics: []
YAML
		log "starting goaws $GOAWS_VERSION on 127.0.0.1:$port"
		spawn "$inst" "$inst/goaws.log" "$(goaws_bin)" -config "$inst/goaws.yaml" Local
		wait_for goaws_ready "$port" || { fail "goaws is not ready on 127.0.0.1:$port (see $inst/goaws.log)"; return 1; }
		log "goaws ready on 127.0.0.1:$port"
	fi
	write_env "$inst" "QUARANTINE_TEST_SQS_ENDPOINT=http://127.0.0.1:$port"
}
