#!/usr/bin/env bash
# node-tools.sh: install the npm tools the API contract tests use into
# .tools/node (git-ignored), idempotently and quietly when they are
# already there:
#
#   openapi-typescript  generates TypeScript types from openapi.yaml
#   typescript          type-checks them (tsc)
#   @redocly/cli        lints openapi.yaml (redocly lint)
#   axe-core            the accessibility checks of the web UI's browser
#                       tests (axe.min.js, injected into each page)
#
# and the npm dependencies of integrations/cloudflare (miniflare, which
# ships workerd) with `npm ci` from its package-lock.json, into its own
# node_modules (git-ignored), again only when they are missing or older
# than the lock file.
#
# The versions are pinned here; a change of a pin reinstalls. Missing node
# and npm are installed from Debian's packages when it can (root or sudo);
# without them the script warns and the tests that need them skip; under
# CI=true that is an error (and the tests fail too).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/.tools/node"
PACKAGES=(
	openapi-typescript@7.13.0
	typescript@5.9.3
	@redocly/cli@2.77.0
	axe-core@4.14.1
)

log() { printf 'node-tools: %s\n' "$*" >&2; }

# install_node installs Debian's nodejs and npm when they are missing (as
# root, or through sudo), as the services script does for the brokers.
install_node() {
	command -v apt-get >/dev/null 2>&1 || return 1
	local run=()
	if [[ "$(id -u)" -ne 0 ]]; then
		command -v sudo >/dev/null 2>&1 || return 1
		run=(sudo)
	fi
	log "installing nodejs and npm (Debian packages)"
	"${run[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null 2>&1 ||
		{ "${run[@]}" apt-get update -qq >/dev/null 2>&1 &&
			"${run[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null 2>&1; }
}

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	install_node || true
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	if [[ "${CI:-}" == "true" ]]; then
		log "ERROR: node and npm are needed (apt-get install nodejs npm)"
		exit 1
	fi
	log "WARNING: node or npm missing (the OpenAPI generator and lint tests will skip)"
	exit 0
fi

# The npm tools (openapi-typescript 7, @redocly/cli 2, miniflare 4) need
# Node.js 20.19 or newer; Debian 12's nodejs is 18.
NODE_MIN=20.19.0
node_version="$(node --version 2>/dev/null | sed 's/^v//')"
if [[ "$(printf '%s\n%s\n' "$NODE_MIN" "$node_version" | sort -V | head -n 1)" != "$NODE_MIN" ]]; then
	msg="Node.js $node_version is too old: the npm tools of the tests need $NODE_MIN or newer. Install a current Node.js (Debian's testing or backports nodejs, NodeSource's packages, or nvm), put it first on PATH, and run make test again"
	if [[ "${CI:-}" == "true" ]]; then
		log "ERROR: $msg"
		exit 1
	fi
	log "WARNING: $msg (the OpenAPI, browser accessibility and Cloudflare tests will skip)"
	exit 0
fi

# cloudflare_deps: npm ci in integrations/cloudflare unless its
# node_modules is already installed from the current package-lock.json.
cloudflare_deps() {
	local cf="$ROOT/integrations/cloudflare"
	[[ -f "$cf/package-lock.json" ]] || return 0
	if [[ -f "$cf/node_modules/.package-lock.json" && -f "$cf/node_modules/miniflare/package.json" &&
		! "$cf/node_modules/.package-lock.json" -ot "$cf/package-lock.json" ]]; then
		return 0
	fi
	log "installing the npm dependencies of integrations/cloudflare (npm ci)"
	if ! (cd "$cf" && npm ci --no-audit --no-fund --loglevel=error >/dev/null); then
		if [[ "${CI:-}" == "true" ]]; then
			log "ERROR: npm ci in integrations/cloudflare failed"
			exit 1
		fi
		log "WARNING: npm ci in integrations/cloudflare failed (the Cloudflare Worker tests will fail)"
		return 0
	fi
	log "installed integrations/cloudflare"
}
cloudflare_deps

want="${PACKAGES[*]}"
if [[ -f "$DIR/.installed" && "$(cat "$DIR/.installed")" == "$want" &&
	-x "$DIR/node_modules/.bin/openapi-typescript" && -x "$DIR/node_modules/.bin/tsc" &&
	-x "$DIR/node_modules/.bin/redocly" && -f "$DIR/node_modules/axe-core/axe.min.js" ]]; then
	exit 0
fi

log "installing ${want} into .tools/node"
mkdir -p "$DIR"
[[ -f "$DIR/package.json" ]] || printf '{"name":"quarantine-node-tools","private":true}\n' >"$DIR/package.json"
if ! npm install --prefix "$DIR" --no-audit --no-fund --loglevel=error --save-exact "${PACKAGES[@]}" >/dev/null; then
	if [[ "${CI:-}" == "true" ]]; then
		log "ERROR: npm install failed"
		exit 1
	fi
	log "WARNING: npm install failed (the OpenAPI generator and lint tests will skip)"
	exit 0
fi
printf '%s\n' "$want" >"$DIR/.installed"
log "installed"
