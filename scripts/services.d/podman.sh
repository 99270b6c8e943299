# Podman, to build the container image (scripts/image.sh, `make image`)
# and for the image's test (deploy/image), which unpacks it and runs its
# entrypoint in a chroot: containers themselves cannot run on these
# machines. Sourced by scripts/services.sh.
#
# A binary: Debian's podman package (about a minute to install; it brings
# the buildah library `podman build` uses). Tests read QUARANTINE_PODMAN.

install_podman() {
	command -v podman >/dev/null 2>&1 && return 0
	log "installing podman (Debian)"
	apt_install podman && command -v podman >/dev/null 2>&1
}

ensure_podman() {
	install_podman || { fail "could not install podman"; return 1; }
	binary podman "QUARANTINE_PODMAN=$(command -v podman)"
	log "podman ready ($(command -v podman), $(podman --version 2>/dev/null))"
}
