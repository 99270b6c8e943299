# Chromium, headless, for the web UI's browser tests (driven by chromedp).
# Sourced by scripts/services.sh. A binary: Debian's chromium package
# (about 30 s to install). Tests read QUARANTINE_CHROMIUM.

install_chromium() {
	[[ -x /usr/bin/chromium ]] && return 0
	log "installing chromium (Debian)"
	apt_install chromium && [[ -x /usr/bin/chromium ]]
}

ensure_chromium() {
	install_chromium || { fail "could not install chromium"; return 1; }
	binary chromium QUARANTINE_CHROMIUM=/usr/bin/chromium
	log "chromium ready (/usr/bin/chromium)"
}
