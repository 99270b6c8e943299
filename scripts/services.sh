#!/usr/bin/env bash
# services.sh: make the services the tests use available on 127.0.0.1,
# idempotently. A service that already answers is never touched.
#
#   scripts/services.sh [SERVICE...]       (default: every known service)
#   scripts/services.sh stop [SERVICE...]  stop what this script started
#
# A service the script starts is recorded under .tools/services/ (its pid
# and start time, or for PostgreSQL and RabbitMQ a marker). `stop` stops
# exactly those, and only while the recorded process is the one it started;
# a service that was already running is never recorded, so never stopped.
#
# Known services: one file each in scripts/services.d/NAME.sh, defining
# ensure_NAME (postgres, and the brokers as they are added).
# Under CI=true a service that cannot be made ready fails the script;
# otherwise the script warns and the tests that need the service skip.
#
# Tests read QUARANTINE_TEST_POSTGRES_URL
# (default postgres://postgres@127.0.0.1:5432/test?sslmode=disable).
set -euo pipefail

log() { printf 'services: %s\n' "$*" >&2; }

# fail reports a service that could not be made ready: fatal under CI.
fail() {
	if [[ "${CI:-}" == "true" ]]; then
		log "ERROR: $*"
		exit 1
	fi
	log "WARNING: $* (tests that need it will skip)"
	return 1
}

# as_root runs a command as root: directly when we are root, else via sudo.
as_root() {
	if [[ "$(id -u)" -eq 0 ]]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo -n "$@"
	else
		log "need root for: $*"
		return 1
	fi
}

# as_postgres runs a command as the postgres system user.
as_postgres() {
	if [[ "$(id -un)" == "postgres" ]]; then
		"$@"
	elif [[ "$(id -u)" -eq 0 ]] && command -v runuser >/dev/null 2>&1; then
		runuser -u postgres -- "$@"
	else
		as_root su postgres -s /bin/sh -c "$(printf '%q ' "$@")"
	fi
}

APT_UPDATED=0
apt_install() {
	if [[ "$APT_UPDATED" -eq 0 ]]; then
		as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
		APT_UPDATED=1
	fi
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@"
}

# wait_for CMD...: retry a readiness check for up to 30 seconds.
wait_for() {
	local i
	for i in $(seq 1 60); do
		if "$@" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.5
	done
	return 1
}

SERVICES_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/services.d"
STATE_DIR="$(cd "$SERVICES_DIR/../.." && pwd)/.tools/services"

# proc_start PID prints the process's start time (clock ticks since boot,
# field 22 of /proc/PID/stat), so that a recorded pid reused by another
# process is not mistaken for ours.
proc_start() {
	local stat
	stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
	stat="${stat##*) }" # the command name may hold spaces
	# shellcheck disable=SC2086
	set -- $stat
	echo "${20}"
}

# record_started NAME [PID]: the script started NAME (as process PID, or,
# without one, by a command its stop_NAME function undoes).
record_started() {
	mkdir -p "$STATE_DIR" || return 0
	if [[ -n "${2:-}" ]]; then
		echo "pid $2 $(proc_start "$2" || echo 0)" >"$STATE_DIR/$1.started"
	else
		echo "cmd" >"$STATE_DIR/$1.started"
	fi
}

# stop_service NAME stops NAME if this script started it.
stop_service() {
	local f="$STATE_DIR/$1.started" kind pid start i
	if [[ ! -f "$f" ]]; then
		log "$1: not started by this script (left alone)"
		return 0
	fi
	read -r kind pid start <"$f"
	if [[ "$kind" == cmd ]]; then
		if declare -F "stop_$1" >/dev/null; then
			"stop_$1" || { log "$1: stop failed"; return 1; }
		fi
		rm -f "$f"
		log "$1: stopped"
		return 0
	fi
	if [[ "$(proc_start "$pid" 2>/dev/null)" != "$start" ]]; then
		log "$1: process $pid has already ended"
		rm -f "$f"
		return 0
	fi
	kill -TERM "$pid" 2>/dev/null || true
	for i in $(seq 1 40); do
		[[ "$(proc_start "$pid" 2>/dev/null)" == "$start" ]] || break
		sleep 0.25
	done
	if [[ "$(proc_start "$pid" 2>/dev/null)" == "$start" ]]; then
		log "$1: process $pid ignored SIGTERM for 10 s: sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$f"
	log "$1: stopped (process $pid)"
}

known_services() {
	local f
	for f in "$SERVICES_DIR"/*.sh; do
		basename "$f" .sh
	done
}

main() {
	local action=ensure
	if [[ "${1:-}" == stop ]]; then
		action=stop
		shift
	fi
	local services=("$@") s status=0
	if [[ ${#services[@]} -eq 0 ]]; then
		mapfile -t services < <(known_services)
	fi
	if [[ "$action" == stop ]]; then
		for s in "${services[@]}"; do
			[[ "$s" == postgresql ]] && s=postgres
			if [[ ! -f "$SERVICES_DIR/$s.sh" ]]; then
				log "unknown service '$s' (known: $(known_services | tr '\n' ' '))"
				exit 2
			fi
			# shellcheck source=/dev/null
			source "$SERVICES_DIR/$s.sh"
			stop_service "$s" || status=1
		done
		return "$status"
	fi
	for s in "${services[@]}"; do
		[[ "$s" == postgresql ]] && s=postgres
		if [[ ! -f "$SERVICES_DIR/$s.sh" ]]; then
			log "unknown service '$s' (known: $(known_services | tr '\n' ' '))"
			exit 2
		fi
		# shellcheck source=/dev/null
		source "$SERVICES_DIR/$s.sh"
		"ensure_$s" || status=1
	done
	# Outside CI a missing service is a warning: the tests skip.
	if [[ "$status" -ne 0 && "${CI:-}" == "true" ]]; then
		exit 1
	fi
	return 0
}

main "$@"
