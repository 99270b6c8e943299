#!/usr/bin/env bash
# image.sh: build the container image quarantine:VERSION and
# quarantine:latest (what `make image` runs) with podman, or buildah when
# podman is missing; installs podman (Debian) when neither is.
#
#   scripts/image.sh                 tags quarantine:$VERSION and quarantine:latest
#   IMAGE=NAME scripts/image.sh      another repository name (tags NAME:$VERSION, NAME:latest)
#   TAGS="a:1 b:2" scripts/image.sh  exactly these tags instead
#   BUILDER=buildah scripts/image.sh  build with buildah (default: podman if installed)
#
# VERSION defaults to `git describe --tags --always --dirty` (else dev).
# Nothing is pulled: the image is FROM scratch (deploy/image/Containerfile)
# with the static binary, the machine's CA certificates and zone data
# (Debian's ca-certificates and tzdata), and a non-root user. The build
# context is a temporary folder, removed afterwards. Prints the image id
# on stdout; everything else goes to stderr.
set -euo pipefail

log() { printf 'image: %s\n' "$*" >&2; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

UID_GID=65532 # the service's user and group in the image
IMAGE="${IMAGE:-quarantine}"
if [[ -z "${VERSION:-}" ]]; then
	VERSION="$(git describe --tags --always --dirty 2>/dev/null || echo dev)"
fi
# A tag is [A-Za-z0-9_.-]{1,128}, not starting with . or -.
TAG_VERSION="$(printf '%s' "$VERSION" | tr -c 'A-Za-z0-9_.-' '-' | sed 's/^[.-]*//' | cut -c1-128)"
TAG_VERSION="${TAG_VERSION:-dev}"
read -r -a tags <<<"${TAGS:-$IMAGE:$TAG_VERSION $IMAGE:latest}"

# The builder: $BUILDER (podman or buildah) when set, else podman, else
# buildah, else install podman.
tool="${BUILDER:-}"
if [[ -n "$tool" ]]; then
	if [[ "$tool" != podman && "$tool" != buildah ]] || ! command -v "$tool" >/dev/null 2>&1; then
		log "BUILDER=$tool: want podman or buildah, installed"
		exit 1
	fi
elif command -v podman >/dev/null 2>&1; then
	tool=podman
elif command -v buildah >/dev/null 2>&1; then
	tool=buildah
else
	"$ROOT/scripts/services.sh" install podman >&2
	tool=podman
fi

certs=/etc/ssl/certs/ca-certificates.crt
zoneinfo=/usr/share/zoneinfo
for f in "$certs" "$zoneinfo"; do
	if [[ ! -e "$f" ]]; then
		log "$f is missing: install Debian's ca-certificates and tzdata"
		exit 1
	fi
done

ctx="$(mktemp -d "${TMPDIR:-/tmp}/quarantine-image.XXXXXX")"
trap 'rm -rf "$ctx"' EXIT

log "building the static binary (version $VERSION)"
CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -tags timetzdata,netgo,osusergo \
	-ldflags "-s -w -X main.version=$VERSION" -o "$ctx/quarantine" ./cmd/quarantine

mkdir -p "$ctx/rootfs/etc/ssl/certs" "$ctx/rootfs/usr/share" "$ctx/rootfs/tmp" "$ctx/data"
chmod 1777 "$ctx/rootfs/tmp"
cp -L "$certs" "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"
# The zone files, without the leap-second ("right") and duplicate
# ("posix") trees: Go reads neither.
cp -a "$zoneinfo" "$ctx/rootfs/usr/share/zoneinfo"
rm -rf "$ctx/rootfs/usr/share/zoneinfo/right" "$ctx/rootfs/usr/share/zoneinfo/posix"
printf 'quarantine:x:%d:%d:quarantine:/data:/nonexistent\n' "$UID_GID" "$UID_GID" >"$ctx/rootfs/etc/passwd"
printf 'quarantine:x:%d:\n' "$UID_GID" >"$ctx/rootfs/etc/group"
chmod -R u=rwX,go=rX "$ctx/rootfs/etc" "$ctx/rootfs/usr"

args=(--file "$ROOT/deploy/image/Containerfile" --build-arg "VERSION=$VERSION")
# Reproducible timestamps: the commit's time.
if epoch="$(git log -1 --format=%ct 2>/dev/null)" && [[ -n "$epoch" ]]; then
	args+=(--timestamp "$epoch")
fi
for t in "${tags[@]}"; do
	args+=(--tag "$t")
done
log "building ${tags[*]} with $tool"
idfile="$ctx/id"
if [[ "$tool" == podman ]]; then
	podman build --pull=never --layers=false --iidfile "$idfile" "${args[@]}" "$ctx" >&2
else
	buildah bud --pull=never --layers=false --iidfile "$idfile" "${args[@]}" "$ctx" >&2
fi
id="$(cat "$idfile")"
log "built ${tags[*]} ($id)"
echo "$id"
