#!/usr/bin/env bash
# The object store's image: SeaweedFS's `weed` (one static Go binary, built here from its Go
# module, never downloaded prebuilt) on Debian bookworm's minbase with python3 and boto3 (the
# AWS SDK for Python, Debian's python3-boto3), which the object-store component's scripts use to
# make its credentials, to check that the store answers S3 requests, and which tests and jobs use
# as an S3 client. Runs as the user `seaweed` (uid 1000, group users). image/node-images.sh calls
# this with the image's name and caches the archive.
#
#   image/object-store/build.sh ARCHIVE REF   (as root; e.g. REF docker.io/mlkube/object-store:0.1.0)
#   image/object-store/build.sh --binary      only `weed`, into the cache (cluster/run-tests.sh
#                                             builds it ahead, while the kwok tests run)
#
# `weed` is built once per SeaweedFS version into ${MLKUBE_CACHE:-$HOME/.cache/mlkube}/seaweedfs-
# <version>/bin (5 to 17 minutes on 2 cores, the less when the control plane's build has filled
# Go's build cache with the packages they share; later builds reuse it), from a module of our own
# that requires SeaweedFS's and copies its `replace` directives and go.sum (the module proxy's
# `go install module@version` refuses a module with replaces).
set -euo pipefail
# shellcheck source=SCRIPTDIR/../oci.sh
source "$(dirname "$0")/../oci.sh"
BINARY_ONLY=false
if [ "${1:-}" = --binary ] && [ $# -eq 1 ]; then BINARY_ONLY=true; else oci_arguments "$0 ARCHIVE REF | --binary" "$@"; fi
# shellcheck source=SCRIPTDIR/../debian.sh
source "$(dirname "$0")/../debian.sh"
# shellcheck source=SCRIPTDIR/../go.sh
source "$(dirname "$0")/../go.sh"
cd "$(dirname "$0")/../.."

# SeaweedFS tags no module versions: this is the proxy's pseudo-version of its 4.53 release line.
SEAWEEDFS_MODULE=github.com/seaweedfs/seaweedfs
SEAWEEDFS_VERSION=v0.0.0-20261109003541-7506e5f91cd6
SEAWEEDFS_DIR=${MLKUBE_CACHE:-$HOME/.cache/mlkube}/seaweedfs-$SEAWEEDFS_VERSION
WEED=$SEAWEEDFS_DIR/bin/weed
USER_ID=1000
GROUP_ID=100
S3_PORT=8333

# The module's go.mod lines that a module requiring it must repeat: its `replace` directives.
seaweedfs_replaces() {
  awk '/^replace \(/ { block = 1; print; next } block { print; if ($0 ~ /^\)/) block = 0; next }
    /^replace / { print }' "$1"
}

build_weed() {
  [ -x "$WEED" ] && return 0
  command -v go >/dev/null || die "the Go toolchain is not on PATH; it builds SeaweedFS once" \
    "install Go 1.26 or newer and put its bin directory on PATH"
  local work=$SEAWEEDFS_DIR/build log=$SEAWEEDFS_DIR/build.log started=$SECONDS
  mkdir -p "$work" "$(dirname "$WEED")"
  say "building SeaweedFS $SEAWEEDFS_VERSION once (5 to 17 minutes on 2 cores); log: $log"
  with_progress "SeaweedFS's build" weed_build_in "$work" "$log" ||
    die "building SeaweedFS failed; the last lines of $log:" "$(tail -n 15 "$log" | tr '\n' ' ')"
  say "built weed in $((SECONDS - started)) s"
}

# weed built in the module WORK writes, its output into LOG: WORK LOG.
weed_build_in() {
  (
    cd "$1"
    go mod download "$SEAWEEDFS_MODULE@$SEAWEEDFS_VERSION"
    source=$(go mod download -json "$SEAWEEDFS_MODULE@$SEAWEEDFS_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
    {
      printf 'module mlkube.local/seaweedfs\n\ngo %s\n\nrequire %s %s\n\n' \
        "$(awk '/^go / {print $2; exit}' "$source/go.mod")" "$SEAWEEDFS_MODULE" "$SEAWEEDFS_VERSION"
      seaweedfs_replaces "$source/go.mod"
    } >go.mod
    # Its go.sum: the checksums of its dependencies, some of which the checksum database lacks.
    install -m 0644 "$source/go.sum" go.sum
    GOFLAGS=-mod=mod CGO_ENABLED=0 env "${GO_BUILD_ENV[@]}" nice go build -trimpath -gcflags=all=-dwarf=false -ldflags="-s -w" -o "$WEED.partial" \
      "$SEAWEEDFS_MODULE/weed"
    mv "$WEED.partial" "$WEED"
  ) >"$2" 2>&1
}

install_weed() {
  local rootfs=$1
  install -m 0755 -o 0 -g 0 "$WEED" "$rootfs/usr/local/bin/weed"
  install -d -m 0755 -o "$USER_ID" -g "$GROUP_ID" "$rootfs/data"
}

check_commands() {
  local rootfs=$1
  say "checking that weed and boto3 run in the image"
  in_chroot "$rootfs" weed version >/dev/null || die "\`weed version\` fails in the object-store image"
  in_chroot "$rootfs" python3 -c 'import boto3' || die "python3 cannot import boto3 in the object-store image"
  rm -rf "${rootfs:?}/tmp/"*
}

run_config() {
  cat <<CONFIG
{
    "User": "$USER_ID:$GROUP_ID",
    "Env": [
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      "LANG=C.UTF-8",
      "PYTHONUNBUFFERED=1",
      "PYTHONDONTWRITEBYTECODE=1"
    ],
    "WorkingDir": "/data",
    "Cmd": ["weed", "mini", "-dir=/data"],
    "ExposedPorts": {"$S3_PORT/tcp": {}},
$(oci_labels mlkube-object-store "SeaweedFS $SEAWEEDFS_VERSION (weed, S3 API on $S3_PORT) with python3 and boto3")
  }
CONFIG
}

if [ "$BINARY_ONLY" = true ]; then
  build_weed
  exit 0
fi
debian_begin
build_weed
debian_rootfs "$WORK/rootfs" python3 python3-boto3 ca-certificates netbase
install_weed "$WORK/rootfs"
add_user "$WORK/rootfs" seaweed "$USER_ID" "$GROUP_ID"
check_commands "$WORK/rootfs"
oci_image keep "$(run_config)"
