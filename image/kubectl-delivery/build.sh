#!/usr/bin/env bash
# The image of the MPIJob launcher's `kubectl-delivery` init container: the cluster's own kubectl
# (the static binary the control plane cache holds, built from upstream's module; never
# downloaded here) and image/kubectl-delivery/deliver.c, compiled with musl-gcc as a static
# binary, which copies it to $TARGET_DIR/kubectl and exits. One layer, no shell, run as the
# conventional non-root user 65532. image/node-images.sh calls this with the image's name and
# KUBECTL in the environment, and caches the archive keyed by kubectl's digest.
#
#   KUBECTL=PATH image/kubectl-delivery/build.sh ARCHIVE REF   (e.g. REF docker.io/mlkube/kubectl-delivery:0.1.0)
set -euo pipefail
# shellcheck source=SCRIPTDIR/../oci.sh
source "$(dirname "$0")/../oci.sh"
oci_arguments "KUBECTL=PATH $0 ARCHIVE REF" "$@"
KUBECTL=$(realpath -m "${KUBECTL:?KUBECTL names the kubectl binary the image delivers}")
cd "$(dirname "$0")"

command -v musl-gcc >/dev/null ||
  die "musl-gcc is not on PATH; it compiles the static deliver binary" "install it: apt-get install musl-tools"
[ -x "$KUBECTL" ] || die "no kubectl at $KUBECTL" "cluster/local-cluster.sh up builds the control plane and its kubectl"
oci_begin

mkdir "$WORK/rootfs"
musl-gcc -static -Os -Wall -Wextra -Werror -ffile-prefix-map="$PWD=." \
  -DVERSION="\"${REF##*:}\"" -o "$WORK/rootfs/deliver" deliver.c
strip "$WORK/rootfs/deliver"
install -m 0755 "$KUBECTL" "$WORK/rootfs/kubectl"
chmod 0755 "$WORK/rootfs/deliver"
"$WORK/rootfs/deliver" -v >/dev/null || die "the deliver binary does not run"
"$WORK/rootfs/kubectl" version --client >/dev/null || die "$KUBECTL does not run"

oci_image root "$(
  cat <<CONFIG
{
    "User": "65532:65532",
    "Entrypoint": ["/deliver"],
$(oci_labels kubectl-delivery)
  }
CONFIG
)"
