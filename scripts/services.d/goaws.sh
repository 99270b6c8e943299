# goaws, the Amazon SQS emulator (Go module github.com/Admiral-Piett/goaws,
# pinned below), on 127.0.0.1:4100 for broker/sqs tests.
# Sourced by scripts/services.sh, which provides log, fail, as_root,
# apt_install and wait_for.
#
# goaws keeps its state in memory only: a running emulator is never
# restarted or touched here. The binary (named "cmd", after its main
# package) is installed under .tools/goaws/VERSION/ (gitignored), its config
# and log live beside it.

GOAWS_VERSION=v0.4.5
GOAWS_HOST=127.0.0.1
GOAWS_PORT=4100

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

ensure_goaws() {
	if goaws_ready; then
		log "goaws ready on $GOAWS_HOST:$GOAWS_PORT (already running)"
		return 0
	fi
	local root dir bin
	root="$(cd "$SERVICES_DIR/../.." && pwd)"
	dir="$root/.tools/goaws/$GOAWS_VERSION"
	bin="$dir/goaws" # named goaws (go install names it cmd), so that ps and benchmarks find it
	mkdir -p "$dir" || { fail "cannot create $dir"; return 1; }
	if [[ ! -x "$bin" ]]; then
		if ! command -v go >/dev/null 2>&1; then
			fail "go is not installed: cannot install goaws"
			return 1
		fi
		log "installing goaws $GOAWS_VERSION into $dir"
		GOBIN="$dir" GOFLAGS=-buildvcs=false go install "github.com/Admiral-Piett/goaws/app/cmd@$GOAWS_VERSION" &&
			mv "$dir/cmd" "$bin" ||
			{ fail "could not install goaws $GOAWS_VERSION"; return 1; }
	fi
	goaws_write_config "$dir/goaws.yaml" || { fail "cannot write $dir/goaws.yaml"; return 1; }
	log "starting goaws $GOAWS_VERSION on $GOAWS_HOST:$GOAWS_PORT (log: $dir/goaws.log)"
	# Detached from this script's session so that it outlives it.
	if command -v setsid >/dev/null 2>&1; then
		setsid "$bin" -config "$dir/goaws.yaml" Local >"$dir/goaws.log" 2>&1 </dev/null &
	else
		nohup "$bin" -config "$dir/goaws.yaml" Local >"$dir/goaws.log" 2>&1 </dev/null &
	fi
	if ! wait_for goaws_ready; then
		fail "goaws is not ready on $GOAWS_HOST:$GOAWS_PORT (see $dir/goaws.log)"
		return 1
	fi
	log "goaws ready on $GOAWS_HOST:$GOAWS_PORT"
}
