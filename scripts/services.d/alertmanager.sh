# Alertmanager (Debian's prometheus-alertmanager 0.25; the Go module's
# current release does not build from the module proxy, its UI assets are
# not in the module) on 127.0.0.1:9093, for the alert package's receiver
# test. Sourced by scripts/services.sh, which provides log, fail, as_root,
# apt_install and wait_for.
#
# No clustering; the root route goes to a receiver that sends nothing (the
# test reads the alerts back from Alertmanager's own API). Its config,
# data and log live under .tools/alertmanager/ (gitignored). A running one
# is never restarted.

ALERTMANAGER_HOST=127.0.0.1
ALERTMANAGER_PORT=9093

alertmanager_ready() { curl -fsS "http://$ALERTMANAGER_HOST:$ALERTMANAGER_PORT/-/ready" >/dev/null 2>&1; }

ensure_alertmanager() {
	if alertmanager_ready; then
		log "alertmanager ready on $ALERTMANAGER_HOST:$ALERTMANAGER_PORT (already running)"
		return 0
	fi
	if ! command -v prometheus-alertmanager >/dev/null 2>&1; then
		log "installing prometheus-alertmanager (Debian)"
		apt_install prometheus-alertmanager || { fail "could not install prometheus-alertmanager"; return 1; }
	fi
	local root dir
	root="$(cd "$SERVICES_DIR/../.." && pwd)"
	dir="$root/.tools/alertmanager"
	mkdir -p "$dir/data" || { fail "cannot create $dir"; return 1; }
	cat >"$dir/alertmanager.yml" <<'YAML'
route:
  receiver: "null"
  group_wait: 1s
  group_interval: 1s
receivers:
  - name: "null"
YAML
	log "starting alertmanager on $ALERTMANAGER_HOST:$ALERTMANAGER_PORT (log: $dir/alertmanager.log)"
	local args=(--config.file="$dir/alertmanager.yml" --storage.path="$dir/data"
		--web.listen-address="$ALERTMANAGER_HOST:$ALERTMANAGER_PORT" --cluster.listen-address=)
	if command -v setsid >/dev/null 2>&1; then
		setsid prometheus-alertmanager "${args[@]}" >"$dir/alertmanager.log" 2>&1 </dev/null &
	else
		nohup prometheus-alertmanager "${args[@]}" >"$dir/alertmanager.log" 2>&1 </dev/null &
	fi
	record_started alertmanager "$!"
	if ! wait_for alertmanager_ready; then
		fail "alertmanager is not ready on $ALERTMANAGER_HOST:$ALERTMANAGER_PORT (see $dir/alertmanager.log)"
		return 1
	fi
	log "alertmanager ready on $ALERTMANAGER_HOST:$ALERTMANAGER_PORT"
}
