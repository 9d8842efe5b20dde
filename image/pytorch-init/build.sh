#!/usr/bin/env bash
# The image of PyTorch workers' `init-pytorch` init container, which the operator gives every
# worker to wait until the Master's name resolves (`sh -c '... nslookup <master> ... sleep 2'`).
# Upstream's default, alpine:3.10, comes from a registry the real node cannot reach; this is the
# same tool set from Debian's busybox-static package (the host's apt sources, never a registry):
# one static /bin/busybox and the applets the command runs, one layer, run as the conventional
# non-root user 65532. image/node-images.sh calls it with the image's name.
#
#   image/pytorch-init/build.sh ARCHIVE REF   (e.g. REF docker.io/mlkube/pytorch-init:0.1.0)
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 ARCHIVE REF" >&2; exit 2; }
ARCHIVE=$(realpath -m "$1")
REF=$2
source "$(dirname "$0")/../oci.sh"
source "$(dirname "$0")/../debian.sh"
PACKAGE=busybox-static
# What the operator's init command calls, and a shell to call them from.
APPLETS=(sh nslookup seq sleep echo)

oci_require_tools
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-0}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$DOWNLOADS/pytorch-init"
(cd "$DOWNLOADS/pytorch-init" && apt-get download -qq "$PACKAGE" >/dev/null) ||
  die "could not download Debian's $PACKAGE" "run apt-get update, then try again"
deb=$(ls -t "$DOWNLOADS/pytorch-init/${PACKAGE}"_*.deb | head -1)
dpkg-deb -x "$deb" "$WORK/package"

mkdir -p "$WORK/rootfs/bin"
install -m 0755 "$WORK/package/bin/busybox" "$WORK/rootfs/bin/busybox"
for applet in "${APPLETS[@]}"; do ln -s busybox "$WORK/rootfs/bin/$applet"; done
"$WORK/rootfs/bin/busybox" sh -c 'seq 1 1 >/dev/null' || die "busybox from $deb does not run"

oci_layer "$WORK/rootfs" "$WORK/layer.tar" root
oci_archive "$ARCHIVE" "$REF" "$(
  cat <<CONFIG
{
    "User": "65532:65532",
    "Env": ["PATH=/bin"],
    "Entrypoint": ["/bin/sh"],
    "Labels": {"org.opencontainers.image.title": "pytorch-init", "org.opencontainers.image.version": "${REF##*:}"}
  }
CONFIG
)" "$WORK/layer.tar"
