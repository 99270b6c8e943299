# PostgreSQL (Debian's postgresql, the newest version installed), a
# private cluster with trust for its own superuser and the database
# "test". Sourced by scripts/services.sh.
#
# initdb and the server run as the postgres user when we are root (initdb
# refuses root), else as ourselves. The cluster's data, socket and log are
# in the instance folder, or, when the postgres user cannot reach the
# project (a checkout under /root, say), in /var/tmp/quarantine-services-*
# (recorded in the instance's `home`). Its socket stays out of
# /var/run/postgresql, the system cluster's.
#
# Tests read QUARANTINE_TEST_POSTGRES_URL.

pg_bindir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }

install_postgres() {
	local bin
	bin="$(pg_bindir)"
	if [[ -n "$bin" && -x "$bin/initdb" && -x "$bin/pg_ctl" ]] && command -v pg_isready >/dev/null 2>&1 &&
		command -v createdb >/dev/null 2>&1; then
		return 0
	fi
	log "installing PostgreSQL (Debian postgresql)"
	apt_install postgresql postgresql-client
	bin="$(pg_bindir)"
	[[ -n "$bin" && -x "$bin/initdb" ]]
}

# pg_user: who runs the cluster.
pg_user() { if [[ "$(id -u)" -eq 0 ]]; then echo postgres; else id -un; fi; }

# pg_home INST: the folder holding the cluster (see above).
pg_home() { user_home postgres "$(pg_user)" "$1"; }

ensure_postgres() {
	local port="${QUARANTINE_POSTGRES_PORT:-25432}" inst home bin u
	inst="$(instance postgres "$port")"
	install_postgres || { fail "could not install postgresql"; return 1; }
	bin="$(pg_bindir)"
	u="$(pg_user)"
	home="$(pg_home "$inst")"
	pg_ready() { pg_isready -q -h 127.0.0.1 -p "$port"; }
	if listening "$port"; then
		reuse postgres "$port" "$inst" QUARANTINE_POSTGRES_PORT pg_ready || return 1
	else
		if [[ ! -f "$home/data/PG_VERSION" ]]; then
			log "postgres: initdb in $home/data"
			rm -rf "$home/data"
			as_user "$u" "$bin/initdb" -D "$home/data" -A trust -U postgres -E UTF8 --locale=C.UTF-8 --no-sync >"$inst/initdb.log" 2>&1 ||
				{ fail "initdb failed (see $inst/initdb.log)"; return 1; }
		fi
		log "starting postgres on 127.0.0.1:$port (log: $home/log)"
		as_user "$u" "$bin/pg_ctl" -D "$home/data" -l "$home/log" -w -t 60 \
			-o "-p $port -k $home -c listen_addresses=127.0.0.1 -c max_connections=200" start >"$inst/pg_ctl.log" 2>&1 ||
			{ fail "postgres did not start (see $inst/pg_ctl.log and $home/log)"; return 1; }
		record "$inst" "$(head -n 1 "$home/data/postmaster.pid")"
		wait_for pg_ready || { fail "postgres is not ready on 127.0.0.1:$port"; return 1; }
	fi
	if ! psql -h 127.0.0.1 -p "$port" -U postgres -d postgres -tAc \
		"SELECT 1 FROM pg_database WHERE datname = 'test'" 2>/dev/null | grep -q 1; then
		createdb -h 127.0.0.1 -p "$port" -U postgres test || { fail "could not create the database test"; return 1; }
	fi
	write_env "$inst" "QUARANTINE_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:$port/test?sslmode=disable"
	log "postgres ready on 127.0.0.1:$port (database test; ours)"
}

stop_postgres() {
	local home bin
	home="$(cat "$1/home")"
	bin="$(pg_bindir)"
	as_user "$(pg_user)" "$bin/pg_ctl" -D "$home/data" -m fast -w -t 30 stop >/dev/null
}
