#!/usr/bin/env bash
# A small image with a shell and the usual tools: Debian's busybox-static (one static binary,
# every applet linked to it in /bin), alone in one layer. The real node's volume provisioner
# runs its helper pods from it (they create and remove a volume's directory on the node), and
# tests use it for pods that only need `sh`, `sha256sum` and friends. image/node-images.sh
# calls this with the image's name (its tag is the package's version) and caches the archive.
#
#   image/busybox/build.sh ARCHIVE REF   (e.g. REF docker.io/mlkube/busybox:1.35.0)
#
# The package comes from the host's apt sources (`apt-get download`), kept in the download
# cache beside the other images' packages.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../oci.sh
source "$(dirname "$0")/../oci.sh"
oci_arguments "$0 ARCHIVE REF" "$@"
DOWNLOADS=${MLKUBE_CACHE:-$HOME/.cache/mlkube}/images/downloads
PACKAGE=busybox-static

{ command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null; } ||
  die "apt-get and dpkg-deb are needed to fetch and unpack $PACKAGE" "build it on Debian or Ubuntu"
oci_begin

# The candidate version of the host's apt, fetched once into the download cache.
deb_file() {
  local version file
  version=$(apt-cache policy "$PACKAGE" | awk '/Candidate:/ {print $2}')
  { [ -n "$version" ] && [ "$version" != "(none)" ]; } ||
    die "apt knows no $PACKAGE" "run apt-get update, and check that the host's apt sources have Debian main"
  mkdir -p "$DOWNLOADS/apt"
  # apt writes the epoch's colon in the file name as %3a.
  file=$(find "$DOWNLOADS/apt" -name "${PACKAGE}_*${version#*:}_*.deb" | head -n1)
  if [ -z "$file" ]; then
    (cd "$DOWNLOADS/apt" && apt-get download -q "$PACKAGE=$version") >&2 ||
      die "apt-get download $PACKAGE=$version failed" "run apt-get update and try again"
    file=$(find "$DOWNLOADS/apt" -name "${PACKAGE}_*${version#*:}_*.deb" | head -n1)
  fi
  [ -n "$file" ] || die "apt-get download left no $PACKAGE package in $DOWNLOADS/apt"
  echo "$file"
}

DEB=$(deb_file)
say "unpacking $(basename "$DEB")"
dpkg-deb -x "$DEB" "$WORK/package"
mkdir -p "$WORK/rootfs/bin" "$WORK/rootfs/tmp"
chmod 1777 "$WORK/rootfs/tmp"
install -m 0755 "$WORK/package/bin/busybox" "$WORK/rootfs/bin/busybox"
for applet in $("$WORK/rootfs/bin/busybox" --list); do
  [ "$applet" = busybox ] || ln -s busybox "$WORK/rootfs/bin/$applet"
done
"$WORK/rootfs/bin/busybox" sh -c 'echo ok' | grep -qx ok ||
  die "the busybox binary does not run"

oci_image root "$(
  cat <<CONFIG
{
    "User": "65532:65532",
    "Env": ["PATH=/bin"],
    "Cmd": ["/bin/sh"],
$(oci_labels busybox)
  }
CONFIG
)"
