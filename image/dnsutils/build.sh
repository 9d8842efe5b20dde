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
# shellcheck source=SCRIPTDIR/../oci.sh
source "$(dirname "$0")/../oci.sh"
oci_arguments "$0 ARCHIVE REF" "$@"
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

debian_begin
debian_rootfs "$WORK/rootfs" bind9-dnsutils
trim "$WORK/rootfs"
check_commands "$WORK/rootfs"
oci_image keep "$(
  cat <<CONFIG
{
    "User": "65532:65532",
    "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
    "Cmd": ["/bin/sh"],
$(oci_labels mlkube-dnsutils "Debian bookworm minbase with bind9-dnsutils (nslookup, dig): PyTorch workers' init-pytorch image")
  }
CONFIG
)"
