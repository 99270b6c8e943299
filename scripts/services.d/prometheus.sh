# Prometheus (Debian's prometheus), for the test in which a real Prometheus
# scrapes the service and fires the shipped rules (cmd/quarantine
# TestServe_AlarmRulesInRealPrometheus). Sourced by scripts/services.sh.
#
# A binary, not a running service: each test starts its own on a free
# loopback port with short intervals. Tests read QUARANTINE_PROMETHEUS.

install_prometheus() {
	[[ -x /usr/bin/prometheus ]] && return 0
	log "installing prometheus (Debian)"
	apt_install prometheus && [[ -x /usr/bin/prometheus ]]
}

ensure_prometheus() {
	install_prometheus || { fail "could not install prometheus"; return 1; }
	binary prometheus QUARANTINE_PROMETHEUS=/usr/bin/prometheus
	log "prometheus ready (/usr/bin/prometheus)"
}
