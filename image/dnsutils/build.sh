#!/usr/bin/env bash
# PyTorch workers' `init-pytorch` image on the local node: Debian bookworm's minbase (dash as
# /bin/sh, coreutils' seq and sleep) with bind9-dnsutils (ISC BIND's nslookup and dig), as
# Kubernetes' own DNS-debugging image is. The operator's init container runs upstream's loop,
# `sh -c 'for i in $(seq N); do if nslookup MASTER; then ...'`: BIND's nslookup walks the pod's
# search domains and exits 0 once one answers, where busybox's (Debian's, the shell running its
# own applet) exits 1 when any of them answers NXDOMAIN. Upstream's alpine:3.10 comes from a
# registry the node cannot reach. Runs as 65532. image/node-images.sh calls this with the
# image's name and caches the archive.
#
#   image/dnsutils/build.sh ARCHIVE REF   (as root; e.g. REF docker.io/mlkube/dnsutils:0.1.0)
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 ARCHIVE REF" >&2; exit 2; }
ARCHIVE=$(realpath -m "$1")
REF=$2
# shellcheck source=SCRIPTDIR/../oci.sh
source "$(dirname "$0")/../oci.sh"
# shellcheck source=SCRIPTDIR/../debian.sh
source "$(dirname "$0")/../debian.sh"
cd "$(dirname "$0")/../.."

# What a shell loop waiting on a name needs, and nothing the image's users read.
trim() {
  local rootfs=$1
  rm -rf "${rootfs:?}"/usr/share/{doc,man,info,locale}/* "${rootfs:?}"/var/cache/apt/archives/*.deb \
    "${rootfs:?}"/tmp/*
}

check_commands() {
  local rootfs=$1
  say "checking that sh, seq, sleep and nslookup run in the image"
  in_chroot "$rootfs" sh -c 'seq 2 >/dev/null && sleep 0 && command -v nslookup >/dev/null' ||
    die "sh, seq, sleep or nslookup does not run in the dnsutils image"
  in_chroot "$rootfs" dig -v >/dev/null 2>&1 || die "BIND's dig does not run in the dnsutils image"
  # The shell must run nslookup from PATH, not an applet of its own.
  [ "$(readlink -f "$rootfs/bin/sh")" = "$rootfs/usr/bin/dash" ] ||
    die "/bin/sh in the dnsutils image is not dash"
}

debian_require_tools
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
WORK=$(debian_workdir)
trap 'debian_remove_workdir "$WORK"' EXIT
debian_rootfs "$WORK/rootfs" bind9-dnsutils
trim "$WORK/rootfs"
check_commands "$WORK/rootfs"
say "packing the layer"
oci_layer "$WORK/rootfs" "$WORK/layer.tar"
oci_archive "$ARCHIVE" "$REF" "$(
  cat <<CONFIG
{
    "User": "65532:65532",
    "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
    "Cmd": ["/bin/sh"],
    "Labels": {
      "org.opencontainers.image.title": "mlkube-dnsutils",
      "org.opencontainers.image.version": "${REF##*:}",
      "org.opencontainers.image.description": "Debian bookworm minbase with bind9-dnsutils (nslookup, dig): PyTorch workers' init-pytorch image"
    }
  }
CONFIG
)" "$WORK/layer.tar"
