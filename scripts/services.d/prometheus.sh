# Prometheus (Debian's prometheus 2.42), for the test in which a real
# Prometheus scrapes the service and fires the shipped rules
# (cmd/quarantine TestServe_AlarmRulesInRealPrometheus). Sourced by
# scripts/services.sh, which provides log, fail, as_root, apt_install and
# wait_for.
#
# Not started here: each test starts its own on a free loopback port with
# short scrape and evaluation intervals (the package's postinst does not
# start one either). This only installs the binary.

ensure_prometheus() {
	if command -v prometheus >/dev/null 2>&1; then
		log "prometheus ready ($(command -v prometheus))"
		return 0
	fi
	log "installing prometheus (Debian)"
	apt_install prometheus || { fail "could not install prometheus"; return 1; }
	log "prometheus ready ($(command -v prometheus))"
}
