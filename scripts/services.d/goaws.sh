# goaws, the Amazon SQS emulator (Go module github.com/Admiral-Piett/goaws,
# pinned in scripts/goaws/go.mod), on 127.0.0.1:4100 for broker/sqs tests.
# Sourced by scripts/services.sh, which provides log, fail, as_root,
# apt_install, wait_for and record_started.
#
# goaws's own main listens on 0.0.0.0 whatever its config says, so the
# binary is built from scripts/goaws (the same server, bound to the
# config's Host). goaws keeps its state in memory only: a running emulator
# is never restarted or touched here. The binary is built into
# .tools/goaws/VERSION/ (gitignored), its config and log live beside it.
# GOAWS_PORT overrides the port (tests of this script use another one).

GOAWS_VERSION=v0.4.5
GOAWS_HOST=127.0.0.1
GOAWS_PORT="${GOAWS_PORT:-4100}"

goaws_ready() { curl -fsS "http://$GOAWS_HOST:$GOAWS_PORT/health" >/dev/null 2>&1; }

# goaws_write_config writes the emulator's config: loopback, no queues
# (its bundled default config points at an outside URL).
goaws_write_config() {
	cat >"$1" <<EOF
Local:
  Host: $GOAWS_HOST
  Port: $GOAWS_PORT
  Region: us-east-1
  AccountId: "100010001000"
  LogToFile: false
  QueueAttributeDefaults:
    VisibilityTimeout: 30
    ReceiveMessageWaitTimeSeconds: 0
    MaximumMessageSize: 262144
  Queues: []
  Topics: []
EOF
}

# goaws_warn_exposed warns when the emulator on GOAWS_PORT listens beyond
# loopback (one started by an older version of this script, say).
goaws_warn_exposed() {
	command -v ss >/dev/null 2>&1 || return 0
	local addrs
	addrs="$(ss -Hltn "sport = :$GOAWS_PORT" 2>/dev/null | awk '{print $4}' | grep -v "^$GOAWS_HOST:" || true)"
	if [[ -n "$addrs" ]]; then
		log "WARNING: the emulator on port $GOAWS_PORT listens on $(echo "$addrs" | tr '\n' ' ')(not only $GOAWS_HOST): stop it and run this script again"
	fi
}

ensure_goaws() {
	if goaws_ready; then
		log "goaws ready on $GOAWS_HOST:$GOAWS_PORT (already running)"
		goaws_warn_exposed
		return 0
	fi
	local root dir bin src
	root="$(cd "$SERVICES_DIR/../.." && pwd)"
	src="$root/scripts/goaws"
	dir="$root/.tools/goaws/$GOAWS_VERSION"
	bin="$dir/goaws" # named goaws, so that ps and benchmarks find it
	mkdir -p "$dir" || { fail "cannot create $dir"; return 1; }
	if [[ ! -x "$bin" || "$src/main.go" -nt "$bin" || "$src/go.mod" -nt "$bin" ]]; then
		if ! command -v go >/dev/null 2>&1; then
			fail "go is not installed: cannot build goaws"
			return 1
		fi
		log "building goaws $GOAWS_VERSION (bound to its config's Host) into $dir"
		(cd "$src" && GOFLAGS=-buildvcs=false go build -o "$bin" .) ||
			{ fail "could not build goaws $GOAWS_VERSION from $src"; return 1; }
	fi
	goaws_write_config "$dir/goaws.yaml" || { fail "cannot write $dir/goaws.yaml"; return 1; }
	log "starting goaws $GOAWS_VERSION on $GOAWS_HOST:$GOAWS_PORT (log: $dir/goaws.log)"
	# Detached from this script's session so that it outlives it.
	if command -v setsid >/dev/null 2>&1; then
		setsid "$bin" -config "$dir/goaws.yaml" Local >"$dir/goaws.log" 2>&1 </dev/null &
	else
		nohup "$bin" -config "$dir/goaws.yaml" Local >"$dir/goaws.log" 2>&1 </dev/null &
	fi
	record_started goaws "$!"
	if ! wait_for goaws_ready; then
		fail "goaws is not ready on $GOAWS_HOST:$GOAWS_PORT (see $dir/goaws.log)"
		return 1
	fi
	log "goaws ready on $GOAWS_HOST:$GOAWS_PORT"
}
