#!/usr/bin/env bash
# services.sh: make the services the tests use available on 127.0.0.1,
# idempotently. A service that already answers is never touched.
#
#   scripts/services.sh [SERVICE...]     (default: every known service)
#
# Known services: postgres.
# Under CI=true a service that cannot be made ready fails the script;
# otherwise the script warns and the tests that need the service skip.
#
# Tests read QUARANTINE_TEST_POSTGRES_URL
# (default postgres://postgres@127.0.0.1:5432/test?sslmode=disable).
set -euo pipefail

KNOWN_SERVICES=(postgres)

PG_HOST=127.0.0.1
PG_PORT=5432
PG_TEST_DB=test

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

pg_ready() { pg_isready -q -h "$PG_HOST" -p "$PG_PORT"; }

# pg_trust_loopback puts trust lines for loopback at the top of
# pg_hba.conf (first match wins) unless they are already there.
pg_trust_loopback() {
	local hba="$1" tmp
	if head -n 5 "$hba" | grep -q '^host all all 127.0.0.1/32 trust'; then
		return 0
	fi
	log "trusting loopback connections in $hba"
	tmp="$(mktemp)"
	{
		echo "# added by quarantine scripts/services.sh: trust loopback (tests only)"
		echo "host all all 127.0.0.1/32 trust"
		echo "host all all ::1/128 trust"
		cat "$hba"
	} >"$tmp"
	as_root cp "$tmp" "$hba"
	rm -f "$tmp"
}

ensure_postgres() {
	if ! pg_ready 2>/dev/null; then
		if ! command -v pg_ctlcluster >/dev/null 2>&1; then
			log "installing PostgreSQL (Debian postgresql)"
			apt_install postgresql || { fail "could not install postgresql"; return 1; }
		fi
		local version
		version="$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)"
		if [[ -z "$version" ]]; then
			fail "no PostgreSQL cluster under /etc/postgresql"
			return 1
		fi
		if pg_ctlcluster "$version" main status >/dev/null 2>&1; then
			log "PostgreSQL $version is running but not ready yet: waiting"
		else
			pg_trust_loopback "/etc/postgresql/$version/main/pg_hba.conf" ||
				{ fail "could not edit pg_hba.conf"; return 1; }
			log "starting PostgreSQL $version"
			as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start ||
				log "pg_ctlcluster start failed"
		fi
		if ! wait_for pg_ready; then
			fail "PostgreSQL is not ready on $PG_HOST:$PG_PORT"
			return 1
		fi
	fi
	if ! psql -h "$PG_HOST" -p "$PG_PORT" -U postgres -d postgres -tAc \
		"SELECT 1 FROM pg_database WHERE datname = '$PG_TEST_DB'" 2>/dev/null | grep -q 1; then
		log "creating database $PG_TEST_DB"
		createdb -h "$PG_HOST" -p "$PG_PORT" -U postgres "$PG_TEST_DB" ||
			{ fail "could not create database $PG_TEST_DB (is loopback trusted for user postgres?)"; return 1; }
	fi
	log "postgres ready on $PG_HOST:$PG_PORT (database $PG_TEST_DB)"
}

main() {
	local services=("$@") s status=0
	if [[ ${#services[@]} -eq 0 ]]; then
		services=("${KNOWN_SERVICES[@]}")
	fi
	for s in "${services[@]}"; do
		case "$s" in
		postgres | postgresql) ensure_postgres || status=1 ;;
		*)
			log "unknown service '$s' (known: ${KNOWN_SERVICES[*]})"
			exit 2
			;;
		esac
	done
	# Outside CI a missing service is a warning: the tests skip.
	if [[ "$status" -ne 0 && "${CI:-}" == "true" ]]; then
		exit 1
	fi
	return 0
}

main "$@"
