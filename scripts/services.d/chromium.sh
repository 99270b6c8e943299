# Chromium, headless, for the web UI's browser tests (web/browser_test.go,
# driven by chromedp). Sourced by scripts/services.sh, which provides log,
# fail, as_root, apt_install and wait_for.
#
# Not a service: a binary. /usr/bin/chromium (Debian's chromium package)
# is used as it is; otherwise the package is installed (about 30 s).
# The tests find it at /usr/bin/chromium or at QUARANTINE_CHROMIUM.

ensure_chromium() {
	if [[ -x /usr/bin/chromium ]]; then
		log "chromium ready (/usr/bin/chromium)"
		return 0
	fi
	log "installing chromium"
	apt_install chromium || { fail "could not install chromium"; return 1; }
	if [[ ! -x /usr/bin/chromium ]]; then
		fail "chromium installed but /usr/bin/chromium is missing"
		return 1
	fi
	log "chromium ready (/usr/bin/chromium)"
}
