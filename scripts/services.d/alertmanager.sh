# Alertmanager (Debian's prometheus-alertmanager 0.25; the Go module's
# current release does not build from the module proxy: its UI assets are
# not in the module), for the alert package's receiver test. Sourced by
# scripts/services.sh.
#
# No clustering; the root route goes to a receiver that sends nothing (the
# test reads the alerts back from Alertmanager's own API). Its config, data
# and log are in the instance folder. Tests read
# QUARANTINE_TEST_ALERTMANAGER_URL.

install_alertmanager() {
	command -v prometheus-alertmanager >/dev/null 2>&1 && return 0
	log "installing prometheus-alertmanager (Debian)"
	apt_install prometheus-alertmanager
}

alertmanager_ready() { curl -fsS "http://127.0.0.1:$1/-/ready" >/dev/null 2>&1; }

ensure_alertmanager() {
	local port="${QUARANTINE_ALERTMANAGER_PORT:-29093}" inst
	inst="$(instance alertmanager "$port")"
	install_alertmanager || { fail "could not install prometheus-alertmanager"; return 1; }
	if listening "$port"; then
		reuse alertmanager "$port" "$inst" QUARANTINE_ALERTMANAGER_PORT alertmanager_ready "$port" || return 1
	else
		mkdir -p "$inst/data"
		cat >"$inst/alertmanager.yml" <<'YAML'
route:
  receiver: "null"
  group_wait: 1s
  group_interval: 1s
receivers:
  - name: "null"
YAML
		log "starting alertmanager on 127.0.0.1:$port"
		spawn "$inst" "$inst/alertmanager.log" prometheus-alertmanager --config.file="$inst/alertmanager.yml" \
			--storage.path="$inst/data" --web.listen-address="127.0.0.1:$port" --cluster.listen-address=
		wait_for alertmanager_ready "$port" ||
			{ fail "alertmanager is not ready on 127.0.0.1:$port (see $inst/alertmanager.log)"; return 1; }
		log "alertmanager ready on 127.0.0.1:$port"
	fi
	write_env "$inst" "QUARANTINE_TEST_ALERTMANAGER_URL=http://127.0.0.1:$port"
}
