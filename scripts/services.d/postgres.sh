# PostgreSQL 15 from Debian, trusted on loopback, with the database "test".
# Sourced by scripts/services.sh, which provides log, fail, as_root,
# apt_install and wait_for.

PG_HOST=127.0.0.1
PG_PORT=5432
PG_TEST_DB=test

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
			as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start &&
				record_started postgres ||
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


# stop_postgres stops the cluster that ensure_postgres started (called by
# `services.sh stop` only when it did).
stop_postgres() {
	local version
	version="$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)"
	[[ -n "$version" ]] || return 0
	as_root pg_ctlcluster --skip-systemctl-redirect "$version" main stop
}
