# RabbitMQ 3.10 (Debian rabbitmq-server) on 127.0.0.1:5672, guest/guest.
# Sourced by scripts/services.sh, which provides log, fail, as_root,
# apt_install and wait_for. A broker that already answers is never touched.
#
# Everything stays on loopback: the AMQP listener (rabbitmq.conf) and epmd
# (ERL_EPMD_ADDRESS in rabbitmq-env.conf, written before the first start).
# Tests read QUARANTINE_TEST_AMQP_URL (default
# amqp://guest:guest@127.0.0.1:5672/); guest may only log in from loopback.

RABBITMQ_HOST=127.0.0.1
RABBITMQ_PORT=5672
RABBITMQ_ETC=/etc/rabbitmq

# rabbitmq_ready opens an AMQP 0-9-1 connection and expects the broker's
# connection.start: a method frame (type 1) on channel 0.
rabbitmq_ready() {
	local first
	first="$(timeout 3 bash -c '
		exec 3<>"/dev/tcp/$0/$1" || exit 1
		printf "AMQP\000\000\011\001" >&3
		head -c 3 <&3 | od -An -tx1
	' "$RABBITMQ_HOST" "$RABBITMQ_PORT" 2>/dev/null)" || return 1
	[[ "$(tr -d ' \n' <<<"$first")" == "010000" ]]
}

rabbitmq_listening() { timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$RABBITMQ_HOST" "$RABBITMQ_PORT" 2>/dev/null; }

# rabbitmq_loopback_config writes the loopback settings unless the files
# already exist (an operator's configuration is never overwritten).
rabbitmq_loopback_config() {
	as_root mkdir -p "$RABBITMQ_ETC" || return 1
	if [[ ! -f "$RABBITMQ_ETC/rabbitmq-env.conf" ]]; then
		log "writing $RABBITMQ_ETC/rabbitmq-env.conf (epmd on loopback)"
		printf 'NODENAME=rabbit@localhost\nERL_EPMD_ADDRESS=127.0.0.1\n' |
			as_root tee "$RABBITMQ_ETC/rabbitmq-env.conf" >/dev/null || return 1
	elif ! grep -q '^ERL_EPMD_ADDRESS=' "$RABBITMQ_ETC/rabbitmq-env.conf"; then
		log "WARNING: $RABBITMQ_ETC/rabbitmq-env.conf does not set ERL_EPMD_ADDRESS: epmd may listen beyond loopback"
	fi
	if [[ ! -f "$RABBITMQ_ETC/rabbitmq.conf" ]]; then
		log "writing $RABBITMQ_ETC/rabbitmq.conf (AMQP on $RABBITMQ_HOST:$RABBITMQ_PORT)"
		printf 'listeners.tcp.local = %s:%s\n' "$RABBITMQ_HOST" "$RABBITMQ_PORT" |
			as_root tee "$RABBITMQ_ETC/rabbitmq.conf" >/dev/null || return 1
	fi
}

# rabbitmq_await_startup retries `rabbitmqctl await_startup`, which exits
# 69 until the node has registered with epmd.
rabbitmq_await_startup() {
	local i
	for i in $(seq 1 60); do
		if as_root env ERL_EPMD_ADDRESS=127.0.0.1 rabbitmqctl -q await_startup --timeout 10 >/dev/null 2>&1; then
			return 0
		fi
		sleep 1
	done
	return 1
}

ensure_rabbitmq() {
	export ERL_EPMD_ADDRESS=127.0.0.1
	if rabbitmq_ready; then
		log "rabbitmq ready on $RABBITMQ_HOST:$RABBITMQ_PORT"
		return 0
	fi
	if rabbitmq_listening; then
		log "something listens on $RABBITMQ_HOST:$RABBITMQ_PORT: waiting for AMQP"
		wait_for rabbitmq_ready && { log "rabbitmq ready on $RABBITMQ_HOST:$RABBITMQ_PORT"; return 0; }
		fail "port $RABBITMQ_PORT is taken by something that does not speak AMQP"
		return 1
	fi
	rabbitmq_loopback_config || { fail "could not write the RabbitMQ configuration under $RABBITMQ_ETC"; return 1; }
	if ! command -v rabbitmq-server >/dev/null 2>&1 && [[ ! -x /usr/sbin/rabbitmq-server ]]; then
		log "installing RabbitMQ (Debian rabbitmq-server)"
		# --force-confold keeps the loopback files written above.
		apt_install -o Dpkg::Options::=--force-confold rabbitmq-server ||
			{ fail "could not install rabbitmq-server"; return 1; }
		# The package may have started the node itself.
		if wait_for rabbitmq_ready; then
			log "rabbitmq ready on $RABBITMQ_HOST:$RABBITMQ_PORT"
			return 0
		fi
	fi
	if as_root env ERL_EPMD_ADDRESS=127.0.0.1 rabbitmqctl -q status >/dev/null 2>&1; then
		log "the RabbitMQ node is up but AMQP does not answer yet: waiting"
	else
		log "starting RabbitMQ (rabbitmq-server -detached)"
		local epmd_ours=1
		pgrep -x epmd >/dev/null 2>&1 && epmd_ours=0
		if as_root env ERL_EPMD_ADDRESS=127.0.0.1 PATH="/usr/sbin:$PATH" rabbitmq-server -detached; then
			record_started rabbitmq
			[[ "$epmd_ours" -eq 1 ]] && record_started rabbitmq-epmd
		else
			log "rabbitmq-server -detached failed"
		fi
	fi
	if ! rabbitmq_await_startup || ! wait_for rabbitmq_ready; then
		fail "RabbitMQ is not ready on $RABBITMQ_HOST:$RABBITMQ_PORT"
		return 1
	fi
	log "rabbitmq ready on $RABBITMQ_HOST:$RABBITMQ_PORT"
}

# stop_rabbitmq stops the node that ensure_rabbitmq started (called by
# `services.sh stop` only when it did), and epmd when the node's start
# started it (rabbitmqctl stop leaves it running).
stop_rabbitmq() {
	as_root env ERL_EPMD_ADDRESS=127.0.0.1 PATH="/usr/sbin:$PATH" rabbitmqctl stop || return 1
	if [[ -f "$STATE_DIR/rabbitmq-epmd.started" ]]; then
		epmd -kill >/dev/null 2>&1 || true
		rm -f "$STATE_DIR/rabbitmq-epmd.started"
	fi
}
