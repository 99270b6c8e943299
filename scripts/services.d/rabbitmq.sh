# RabbitMQ (Debian's rabbitmq-server), a private node: its own name,
# AMQP port, distribution port and epmd (ERL_EPMD_PORT), with its
# configuration, environment file, Mnesia data, logs and pid file in the
# instance folder, so that neither /etc/rabbitmq nor the machine's node or
# epmd is read or touched. guest/guest on loopback. Sourced by
# scripts/services.sh.
#
# As root the node runs as the rabbitmq user (as Debian's wrapper does;
# its cookie is that user's); otherwise as ourselves. Tests read
# QUARANTINE_TEST_AMQP_URL, and, to run rabbitmqctl against the node or
# start nodes of their own on the same epmd, QUARANTINE_TEST_RABBITMQ_NODE
# and QUARANTINE_TEST_ERL_EPMD_PORT.

RABBITMQ_LIB=/usr/lib/rabbitmq/bin

install_rabbitmq() {
	[[ -x "$RABBITMQ_LIB/rabbitmq-server" && -x "$RABBITMQ_LIB/rabbitmqctl" ]] && return 0
	log "installing RabbitMQ (Debian rabbitmq-server)"
	apt_install rabbitmq-server && [[ -x "$RABBITMQ_LIB/rabbitmq-server" ]]
}

rabbitmq_user() { if [[ "$(id -u)" -eq 0 ]]; then echo rabbitmq; else id -un; fi; }

# rabbitmq_env INST PORT: the node's environment; its files are in the
# instance's home (user_home: the instance folder, unless the rabbitmq
# user cannot reach it).
rabbitmq_env() {
	local inst port="$2"
	inst="$(cat "$1/home")"
	echo "RABBITMQ_NODENAME=qsvc$port@localhost"
	echo "RABBITMQ_NODE_IP_ADDRESS=127.0.0.1"
	echo "RABBITMQ_NODE_PORT=$port"
	echo "RABBITMQ_DIST_PORT=$((port + 1))"
	echo "ERL_EPMD_PORT=$((port + 2))"
	echo "ERL_EPMD_ADDRESS=127.0.0.1"
	echo "ERL_FLAGS=-kernel inet_dist_use_interface {127,0,0,1}" # the distribution port too
	echo "RABBITMQ_CONF_ENV_FILE=$inst/rabbitmq-env.conf"
	echo "RABBITMQ_CONFIG_FILE=$inst/rabbitmq.conf"
	echo "RABBITMQ_ADVANCED_CONFIG_FILE=$inst/advanced.config"
	echo "RABBITMQ_ENABLED_PLUGINS_FILE=$inst/enabled_plugins"
	echo "RABBITMQ_MNESIA_BASE=$inst/mnesia"
	echo "RABBITMQ_LOG_BASE=$inst/log"
	echo "RABBITMQ_PID_FILE=$inst/rabbitmq.pid"
}

# rabbitmq_run INST PORT CMD...: a RabbitMQ command with the node's
# environment, as the node's user.
rabbitmq_run() {
	local inst="$1" port="$2" cmd="$3"
	shift 3
	local envs
	mapfile -t envs < <(rabbitmq_env "$inst" "$port")
	as_user "$(rabbitmq_user)" env "${envs[@]}" "$RABBITMQ_LIB/$cmd" "$@"
}

# rabbitmq_ready PORT opens an AMQP 0-9-1 connection and expects the
# broker's connection.start: a method frame (type 1) on channel 0.
rabbitmq_ready() {
	local first
	first="$(timeout 3 bash -c '
		exec 3<>"/dev/tcp/127.0.0.1/$0" || exit 1
		printf "AMQP\000\000\011\001" >&3
		head -c 3 <&3 | od -An -tx1
	' "$1" 2>/dev/null)" || return 1
	[[ "$(tr -d ' \n' <<<"$first")" == "010000" ]]
}

# rabbitmq_start INST PORT starts the node detached and waits up to 60 s
# for AMQP (a cheap check: rabbitmqctl starts an Erlang VM each time).
rabbitmq_start() {
	local inst="$1" port="$2" i
	local home
	home="$(cat "$inst/home")"
	rm -f "$home/rabbitmq.pid" "$inst/started"
	log "starting RabbitMQ node qsvc$port@localhost on 127.0.0.1:$port"
	rabbitmq_run "$inst" "$port" rabbitmq-server -detached >"$inst/start.log" 2>&1 || return 1
	for i in $(seq 1 240); do
		if [[ ! -f "$inst/started" && -s "$home/rabbitmq.pid" ]]; then
			record "$inst" "$(cat "$home/rabbitmq.pid")"
		fi
		rabbitmq_ready "$port" && [[ -f "$inst/started" ]] && return 0
		sleep 0.25
	done
	return 1
}

ensure_rabbitmq() {
	local port="${QUARANTINE_RABBITMQ_PORT:-26672}" inst u i home
	inst="$(instance rabbitmq "$port")"
	install_rabbitmq || { fail "could not install rabbitmq-server"; return 1; }
	u="$(rabbitmq_user)"
	if listening "$port"; then
		reuse rabbitmq "$port" "$inst" QUARANTINE_RABBITMQ_PORT rabbitmq_ready "$port" || return 1
	else
		if listening "$((port + 1))"; then
			fail "port $((port + 1)) (the node's distribution port) is taken (set QUARANTINE_RABBITMQ_PORT)"
			return 1
		fi
		# The epmd port may hold the epmd of an earlier start of ours (a
		# node that did not come up leaves it): any other listener is not
		# ours.
		if listening "$((port + 2))" && ! as_user "$u" env ERL_EPMD_PORT="$((port + 2))" epmd -names >/dev/null 2>&1; then
			fail "port $((port + 2)) (the node's epmd port) is taken (set QUARANTINE_RABBITMQ_PORT)"
			return 1
		fi
		home="$(user_home rabbitmq "$u" "$inst")"
		printf 'listeners.tcp.local = 127.0.0.1:%s\nloopback_users.guest = true\n' "$port" >"$home/rabbitmq.conf"
		echo '[].' >"$home/advanced.config"
		echo '[].' >"$home/enabled_plugins"
		: >"$home/rabbitmq-env.conf"
		mkdir -p "$home/mnesia" "$home/log"
		[[ "$u" == "$(id -un)" ]] || chown -R "$u:" "$home"
		# A node that does not come up (seen once on a loaded machine, with
		# nothing logged) is stopped and started once more.
		for i in 1 2; do
			rabbitmq_start "$inst" "$port" && break
			rabbitmq_run "$inst" "$port" rabbitmqctl -n "qsvc$port@localhost" -q stop >/dev/null 2>&1 || true
			kill_recorded "$inst"
			after_stop_rabbitmq "$inst"
			if [[ "$i" -eq 2 ]]; then
				fail "RabbitMQ is not ready on 127.0.0.1:$port (see $inst/start.log and $home/log)"
				return 1
			fi
			log "rabbitmq: the node did not come up: starting it again"
		done
		log "rabbitmq ready on 127.0.0.1:$port"
	fi
	write_env "$inst" "QUARANTINE_TEST_AMQP_URL=amqp://guest:guest@127.0.0.1:$port/" \
		"QUARANTINE_TEST_RABBITMQ_NODE=qsvc$port@localhost" "QUARANTINE_TEST_ERL_EPMD_PORT=$((port + 2))"
}

stop_rabbitmq() {
	local port="${1##*-}"
	rabbitmq_run "$1" "$port" rabbitmqctl -n "qsvc$port@localhost" -q stop >/dev/null 2>&1
}

# after_stop_rabbitmq: the node's own epmd outlives it (rabbitmqctl stop
# leaves it running).
after_stop_rabbitmq() {
	local port="${1##*-}"
	as_user "$(rabbitmq_user)" env ERL_EPMD_PORT="$((port + 2))" epmd -kill >/dev/null 2>&1 || true
}
