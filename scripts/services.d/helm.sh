# Helm, for the tests of the chart (deploy/helm/quarantine): `helm lint`
# and `helm template`, both offline. Sourced by scripts/services.sh.
#
# A binary: the Go module's, at the version pinned below, installed with
# `go install` under .tools/helm/VERSION/ (about 4 minutes on 2 cores the
# first time; cached afterwards). Tests read QUARANTINE_HELM.

HELM_VERSION=v3.22.0 # helm.sh/helm/v3

helm_bin() { echo "$ROOT/.tools/helm/$HELM_VERSION/helm"; }

install_helm() {
	local bin
	bin="$(helm_bin)"
	[[ -x "$bin" ]] && return 0
	command -v go >/dev/null 2>&1 || { log "go is not installed: cannot install helm"; return 1; }
	log "installing helm $HELM_VERSION into ${bin%/*} (go install; about 4 minutes the first time)"
	mkdir -p "${bin%/*}"
	GOBIN="${bin%/*}" GOFLAGS=-buildvcs=false CGO_ENABLED=0 go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
}

ensure_helm() {
	install_helm || { fail "could not install helm $HELM_VERSION"; return 1; }
	binary helm "QUARANTINE_HELM=$(helm_bin)"
	log "helm ready ($(helm_bin))"
}
