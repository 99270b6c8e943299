# systemd-analyze, for the test of the shipped unit
# (deploy/systemd/unit_test.go: `verify` and `security --offline`).
# Sourced by scripts/services.sh. A binary, from Debian's systemd package
# (installed when missing; nothing is started). Tests look it up on PATH.

install_systemd-analyze() {
	command -v systemd-analyze >/dev/null 2>&1 && return 0
	log "installing systemd (Debian) for systemd-analyze"
	apt_install systemd && command -v systemd-analyze >/dev/null 2>&1
}

ensure_systemd-analyze() {
	install_systemd-analyze || { fail "could not install systemd-analyze"; return 1; }
	log "systemd-analyze ready ($(command -v systemd-analyze))"
}
