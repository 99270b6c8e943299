#!/usr/bin/env bash
# services.sh: the project's own private instances of the services the
# tests use, on loopback ports of their own, never the machine's.
#
#   scripts/services.sh [SERVICE...]          start each (or reuse ours); default: all
#   scripts/services.sh stop [SERVICE...]     stop what this script started, nothing else
#   scripts/services.sh install [SERVICE...]  install what each needs; start nothing
#   scripts/services.sh env                   print the variables the tests read
#   scripts/services.sh status                list the instances this script started
#
# Every instance lives in .tools/services/NAME-PORT/ (QUARANTINE_SERVICES_DIR
# moves the whole folder): its data, configuration, socket, log, pid file
# and `env`, the variables through which the tests find it. The script
# never starts, stops or edits a system-wide service or anything under
# /etc; it only installs Debian packages (apt-get, as root or through
# sudo) when a binary is missing. A port that answers but is not an
# instance of ours is an error, never used.
#
# After each run .tools/services/env (KEY=VALUE) and env.sh (for `.`) hold
# the variables of the running instances (the most recently started one of
# a service wins); a variable already set in the environment wins over
# env.sh, so `make test` can be pointed at services of your own. The Go
# tests read the same file when the variable is unset (internal/testenv).
#
# Services (one file each in scripts/services.d/NAME.sh) and their ports:
#   postgres      QUARANTINE_POSTGRES_PORT      25432
#   rabbitmq      QUARANTINE_RABBITMQ_PORT      26672 (+1 distribution, +2 its own epmd)
#   nats          QUARANTINE_NATS_PORT          24222
#   goaws         QUARANTINE_GOAWS_PORT         24100 (GOAWS_PORT too)
#   alertmanager  QUARANTINE_ALERTMANAGER_PORT  29093
#   prometheus, promtool, chromium, helm, podman, haproxy: binaries only
#   (each test starts its own; helm is built into .tools/helm, podman and
#   haproxy are Debian's)
# A port override makes another instance with its own folder and record;
# `stop` stops every instance this script started.
#
# Under CI=true a service that cannot be made ready fails the script;
# otherwise the script warns and the tests that need it skip.
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

# as_user USER CMD...: run CMD as USER when we are root, else as ourselves
# (a developer's own account runs the servers it starts).
as_user() {
	local u="$1"
	shift
	if [[ "$(id -u)" -eq 0 && "$u" != root ]]; then
		runuser -u "$u" -- "$@"
	else
		"$@"
	fi
}

APT_UPDATED=0
apt_install() {
	if ! command -v apt-get >/dev/null 2>&1; then
		log "apt-get is not available: install $* by hand"
		return 1
	fi
	if [[ "$APT_UPDATED" -eq 0 ]]; then
		as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2 || return 1
		APT_UPDATED=1
	fi
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >&2
}

# need CMD PACKAGE: install PACKAGE (Debian) unless CMD is on PATH.
need() {
	command -v "$1" >/dev/null 2>&1 && return 0
	log "installing $2 (for $1)"
	apt_install "$2" && command -v "$1" >/dev/null 2>&1
}

# wait_for CMD...: retry a readiness check for up to 30 seconds.
wait_for() {
	local i
	for i in $(seq 1 120); do
		if "$@" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.25
	done
	return 1
}

# listening PORT: something accepts TCP connections on 127.0.0.1:PORT.
listening() { timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0"' "$1" 2>/dev/null; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SERVICES_DIR="$ROOT/scripts/services.d"
STATE_DIR="${QUARANTINE_SERVICES_DIR:-$ROOT/.tools/services}"
mkdir -p "$STATE_DIR"
STATE_DIR="$(cd "$STATE_DIR" && pwd)"

# instance NAME PORT prints (and creates) the folder of one instance.
instance() {
	local d="$STATE_DIR/$1-$2"
	mkdir -p "$d"
	chmod 755 "$d"
	echo "$d"
}

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

# record INST PID: the instance in INST runs as process PID.
record() { echo "$2 $(proc_start "$2" || echo 0)" >"$1/started"; }

# recorded_alive INST: the process recorded in INST/started still runs.
recorded_alive() {
	local pid start
	[[ -f "$1/started" ]] || return 1
	read -r pid start <"$1/started"
	[[ -n "$pid" && "$(proc_start "$pid" 2>/dev/null)" == "$start" ]]
}

# kill_recorded INST: SIGTERM, then SIGKILL after 10 s, the recorded process.
kill_recorded() {
	local pid start i
	recorded_alive "$1" || return 0
	read -r pid start <"$1/started"
	kill -TERM "$pid" 2>/dev/null || true
	for i in $(seq 1 40); do
		recorded_alive "$1" || return 0
		sleep 0.25
	done
	log "process $pid ignored SIGTERM for 10 s: sending SIGKILL"
	kill -KILL "$pid" 2>/dev/null || true
}

# spawn INST LOG CMD...: start CMD detached from this script (it outlives
# it) and record its pid in INST.
spawn() {
	local inst="$1" logf="$2"
	shift 2
	setsid "$@" >"$logf" 2>&1 </dev/null &
	record "$inst" "$!"
}

# write_env INST KEY=VALUE...: the variables through which tests find INST.
write_env() {
	local inst="$1"
	shift
	printf '%s\n' "$@" >"$inst/env"
}

# user_home NAME USER INST: a folder for the files of the instance in
# INST that USER (the server's own user) writes: INST/data-USER, or, when
# USER cannot reach INST (a checkout under /root, say), one of its own
# under /var/tmp/quarantine-services-*. The choice is kept in INST/home.
user_home() {
	local name="$1" u="$2" inst="$3" home
	if [[ -f "$inst/home" ]]; then
		cat "$inst/home"
		return 0
	fi
	home="$inst/data-$u"
	mkdir -p "$home"
	if [[ "$u" != "$(id -un)" ]]; then
		chown "$u:" "$home"
		if ! as_user "$u" test -w "$home"; then
			home="/var/tmp/quarantine-services-$(printf '%s' "$inst" | sha256sum | cut -c1-12)"
			log "$name: the $u user cannot reach $inst: its files live in $home"
			mkdir -p "$home"
			chown "$u:" "$home"
			chmod 700 "$home"
		fi
	fi
	echo "$home" >"$inst/home"
	echo "$home"
}

# reuse NAME PORT INST PORTVAR READY...: PORT answers. 0 when it is our
# instance (recorded in INST) and READY succeeds: it is reused. Anything
# else is a failure: a port taken by something not ours is never used.
reuse() {
	local name="$1" port="$2" inst="$3" var="$4"
	shift 4
	if recorded_alive "$inst" && wait_for "$@"; then
		log "$name ready on 127.0.0.1:$port (ours, reused)"
		return 0
	fi
	fail "port $port is taken by something that is not our $name (set $var)"
}

# binary NAME KEY=VALUE...: a tool, not a server (each test starts its
# own): its variables go into the combined env, and there is nothing to
# stop.
binary() {
	local inst="$STATE_DIR/$1"
	shift
	mkdir -p "$inst"
	: >"$inst/binary"
	write_env "$inst" "$@"
}

# combine rebuilds STATE_DIR/env and env.sh from the instances' env files
# (oldest first, so that the most recent instance of a service wins).
combine() {
	local f files=()
	while IFS= read -r f; do
		if recorded_alive "$(dirname "$f")" || [[ -f "$(dirname "$f")/binary" ]]; then
			files+=("$f")
		fi
	done < <(ls -1tr "$STATE_DIR"/*/env 2>/dev/null || true)
	if [[ ${#files[@]} -eq 0 ]]; then
		: >"$STATE_DIR/env.new"
	else
		cat "${files[@]}" | awk -F= '{v[$1]=$0; if (!($1 in seen)) {seen[$1]=1; k[++n]=$1}} END {for (i=1;i<=n;i++) print v[k[i]]}' >"$STATE_DIR/env.new"
	fi
	mv "$STATE_DIR/env.new" "$STATE_DIR/env"
	{
		echo "# written by scripts/services.sh: the tests' variables (a value already set wins)"
		awk -F= '{k=$1; sub(/^[^=]*=/, ""); printf ": \"${%s:=%s}\"; export %s\n", k, $0, k}' "$STATE_DIR/env"
	} >"$STATE_DIR/env.sh"
}

known_services() {
	local f
	for f in "$SERVICES_DIR"/*.sh; do
		basename "$f" .sh
	done
}

load() {
	local s="$1"
	[[ "$s" == postgresql ]] && s=postgres
	if [[ ! -f "$SERVICES_DIR/$s.sh" ]]; then
		log "unknown service '$s' (known: $(known_services | tr '\n' ' '))"
		exit 2
	fi
	# shellcheck source=/dev/null
	source "$SERVICES_DIR/$s.sh"
	echo "$s"
}

# stop_instances NAME: stop every running instance of NAME that this
# script started, and forget it.
stop_instances() {
	local name="$1" inst found=0
	if [[ -f "$STATE_DIR/$name/binary" ]]; then
		rm -rf "${STATE_DIR:?}/$name"
		log "$name: a binary (nothing to stop)"
		return 0
	fi
	for inst in "$STATE_DIR/$name"-*/; do
		[[ -d "$inst" ]] || continue
		inst="${inst%/}"
		[[ -f "$inst/started" ]] || continue
		found=1
		if recorded_alive "$inst"; then
			if declare -F "stop_$name" >/dev/null; then
				"stop_$name" "$inst" || log "$name: stop_$name failed: killing the process"
			fi
			kill_recorded "$inst"
			log "$name: stopped ${inst##*/}"
		else
			log "$name: ${inst##*/} had already ended"
		fi
		if declare -F "after_stop_$name" >/dev/null; then
			"after_stop_$name" "$inst" || true
		fi
		rm -f "$inst/started" "$inst/env"
	done
	if [[ "$found" -eq 0 ]]; then
		log "$name: not started by this script (left alone)"
	fi
}

main() {
	local action=ensure
	case "${1:-}" in
	stop | install | env | status)
		action="$1"
		shift
		;;
	esac
	if [[ "$action" == env ]]; then
		combine
		cat "$STATE_DIR/env"
		return 0
	fi
	if [[ "$action" == status ]]; then
		local inst
		for inst in "$STATE_DIR"/*/; do
			inst="${inst%/}"
			recorded_alive "$inst" && echo "${inst##*/} running (pid $(cut -d' ' -f1 "$inst/started"))"
		done
		return 0
	fi
	local services=("$@") s status=0
	if [[ ${#services[@]} -eq 0 ]]; then
		mapfile -t services < <(known_services)
	fi
	if [[ "$action" != stop ]]; then
		need curl curl || { fail "curl is needed"; status=1; }
		need runuser util-linux || true
		need setsid util-linux || true
	fi
	for s in "${services[@]}"; do
		s="$(load "$s")"
		source "$SERVICES_DIR/$s.sh"
		case "$action" in
		stop) stop_instances "$s" || status=1 ;;
		install) "install_$s" || { fail "$s: could not install it"; status=1; } ;;
		ensure) "ensure_$s" || status=1 ;;
		esac
	done
	combine
	# Outside CI a missing service is a warning: the tests skip.
	if [[ "$status" -ne 0 && "${CI:-}" == "true" ]]; then
		exit 1
	fi
	return 0
}

main "$@"
