# HAProxy, the round-robin load balancer of the several-instances test
# (deploy/cluster), which writes its own configuration and runs it on
# loopback ports of its own. Sourced by scripts/services.sh. A binary:
# Debian's haproxy package (installed when missing; the package's own
# service is never started or configured). Tests read QUARANTINE_HAPROXY.

install_haproxy() {
	command -v haproxy >/dev/null 2>&1 && return 0
	log "installing haproxy (Debian)"
	apt_install haproxy && command -v haproxy >/dev/null 2>&1
}

ensure_haproxy() {
	install_haproxy || { fail "could not install haproxy"; return 1; }
	binary haproxy "QUARANTINE_HAPROXY=$(command -v haproxy)"
	log "haproxy ready ($(command -v haproxy), $(haproxy -v 2>/dev/null | head -1))"
}
