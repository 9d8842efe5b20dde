#!/usr/bin/env bash
# The sandbox image of the real node: image/pause/pause.c compiled with musl-gcc as a static
# binary, alone in one layer, run as the conventional pause user 65535. image/node-images.sh
# calls this with the image's name; the version pause.c prints is the reference's tag.
#
#   image/pause/build.sh ARCHIVE REF      (e.g. REF docker.io/mlkube/pause:3.10)
#
# Reproducible for the same compiler: no timestamps or paths in the binary, and the layer's
# times are $SOURCE_DATE_EPOCH.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../oci.sh
source "$(dirname "$0")/../oci.sh"
oci_arguments "$0 ARCHIVE REF" "$@"
cd "$(dirname "$0")"

command -v musl-gcc >/dev/null ||
  die "musl-gcc is not on PATH; it compiles the static pause binary" "install it: apt-get install musl-tools"
oci_begin

mkdir "$WORK/rootfs"
# -ffile-prefix-map keeps the build directory out of the binary, should an assert name a file.
musl-gcc -static -Os -Wall -Wextra -Werror -ffile-prefix-map="$PWD=." \
  -DVERSION="\"${REF##*:}\"" -o "$WORK/rootfs/pause" pause.c
strip "$WORK/rootfs/pause"
chmod 0755 "$WORK/rootfs/pause"
"$WORK/rootfs/pause" -v >/dev/null || die "the pause binary does not run"

oci_image root "$(
  cat <<CONFIG
{
    "User": "65535:65535",
    "Entrypoint": ["/pause"],
$(oci_labels pause)
  }
CONFIG
)"
