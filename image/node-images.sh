#!/usr/bin/env bash
# Every image the real node runs, built without a container daemon and never pulled from a
# registry, each only when its cached archive is missing or its inputs changed. Prints one line
# per image on stdout, `<full image reference> <absolute path of its OCI archive>`, for
# the local cluster's pushes to its registry (cluster/node/registry.sh) and `mlkube images push`;
# progress and errors go to stderr, and any failure exits 1.
#
#   image/node-images.sh [NAME...]   (as root: the Debian-based images are built with mmdebstrap)
#
# NAMEs (pause, mlkube, training, notebook-hub, kubectl-delivery, busybox, object-store,
# dnsutils, serving, gateway) build and print only those images: cluster/run-tests.sh builds the slow ones that
# need nothing else early, in the background.
#
#   docker.io/mlkube/pause:3.10              image/pause/       the sandbox image
#   docker.io/mlkube/mlkube:<version>        image/build.sh     the operator
#   docker.io/mlkube/training:<version>      image/training/    Python with TF, JAX, sklearn, XGBoost
#   docker.io/mlkube/notebook-hub:<version>  image/notebook-hub/  JupyterHub, and the notebooks
#   docker.io/mlkube/kubectl-delivery:<version>  image/kubectl-delivery/  kubectl for MPIJob launchers
#   docker.io/mlkube/busybox:<busybox version>   image/busybox/   a shell: the volume provisioner's helper pods
#   docker.io/mlkube/object-store:<version>  image/object-store/  SeaweedFS (built from its Go module) and boto3
#   docker.io/mlkube/dnsutils:<version>      image/dnsutils/  BIND's nslookup: PyTorch workers' init container
#   docker.io/mlkube/serving:<version>       image/serving/   MLServer (V2 protocol) for XGBoost and TensorFlow models
#   docker.io/mlkube/gateway:<version>       image/gateway/   Traefik (built from its Go module): the Gateway API
#
# kubectl-delivery copies the control plane's own kubectl: $MLKUBE_KUBECTL, or the newest
# ${MLKUBE_CACHE:-$HOME/.cache/mlkube}/controlplane/*/bin/kubectl cluster/local-cluster.sh built.
#
# <version> is the crate's. The archives are ${MLKUBE_CACHE:-$HOME/.cache/mlkube}/images/
# <name>-<tag>.oci.tar, each with <archive>.key: the digest of what it was built from (its
# directory under image/, the shared scripts, the examples copied in, the host's Debian
# sources, its name and timestamp). The operator's archive is keyed by its binary, which cargo
# rebuilds when the source changes. Downloads are cached beside them (image/debian.sh). Only
# one run builds at a time; another waits for it.
set -euo pipefail
# shellcheck source=SCRIPTDIR/oci.sh
source "$(dirname "$0")/oci.sh"
# shellcheck source=SCRIPTDIR/debian.sh
source "$(dirname "$0")/debian.sh"
cd "$(dirname "$0")/.."

REPOSITORY=docker.io/mlkube
PAUSE_TAG=3.10

crate_version() {
  awk -F'"' '/^version *=/ { print $2; exit }' Cargo.toml
}

# The digest of the files under PATHS (names and contents) and of the extra text on stdin.
inputs_digest() {
  {
    find "$@" -type f ! -path '*/__pycache__/*' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
    cat
  } | sha256sum | awk '{print $1}'
}

# The time of the last commit that touched PATHS, so an image's timestamp changes with its
# inputs only; the last commit's for new paths; 0 outside a git checkout.
inputs_epoch() {
  local epoch
  epoch=$(git log -1 --format=%ct -- "$@" 2>/dev/null || true)
  [ -n "$epoch" ] || epoch=$(git log -1 --format=%ct 2>/dev/null || echo 0)
  echo "$epoch"
}

# Builds NAME:TAG with BUILD (a script taking ARCHIVE and REF) unless the cached archive's key
# matches, then prints its line: the only output on stdout. EXTRA is text that belongs in the
# key besides the files of INPUTS (tool versions, the apt sources).
cached_image() {
  local name=$1 tag=$2 build=$3 extra=$4
  shift 4
  local ref=$REPOSITORY/$name:$tag archive=$CACHE/$name-$tag.oci.tar key epoch started
  epoch=$(inputs_epoch "$@")
  key=$(printf '%s\n' "$ref" "$epoch" "$extra" | inputs_digest "$@")
  if [ -f "$archive" ] && [ "$(cat "$archive.key" 2>/dev/null)" = "$key" ]; then
    say "$ref: up to date ($archive)"
  else
    say "$ref: building with $build"
    started=$SECONDS
    rm -f "$archive.key"
    SOURCE_DATE_EPOCH=$epoch "$build" "$archive" "$ref" >&2 ||
      die "$build could not build $ref" "its messages above say why"
    echo "$key" >"$archive.key"
    say "$ref: built in $((SECONDS - started)) s"
  fi
  echo "$ref $archive"
}

# The operator's image keeps its own key (image/build.sh): cargo decides whether the binary
# changed, and the archive is written again only if it did.
operator_image() {
  local ref=$REPOSITORY/mlkube:$VERSION archive=$CACHE/mlkube-$VERSION.oci.tar
  say "$ref: image/build.sh"
  image/build.sh "$archive" >&2 || die "image/build.sh could not build $ref" "its messages above say why"
  echo "$ref $archive"
}

# Waits for any other run, then clears the scratch directories that an interrupted one left.
take_lock() {
  local dir
  mkdir -p "$CACHE"
  exec 9>"$CACHE/.lock"
  if ! flock --nonblock 9; then
    say "waiting for another image/node-images.sh to finish"
    flock 9
  fi
  for dir in "$CACHE"/work.*; do debian_remove_workdir "$dir"; done
}

IMAGES=(pause mlkube training notebook-hub kubectl-delivery busybox object-store dnsutils serving gateway)
for name in "$@"; do
  [[ " ${IMAGES[*]} " == *" $name "* ]] ||
    die "no image named $name" "name some of: ${IMAGES[*]}, or none for all of them"
done
WANTED=("$@")
# Whether the run builds image NAME: every image when none was named.
wanted() { [ ${#WANTED[@]} -eq 0 ] || [[ " ${WANTED[*]} " == *" $1 "* ]]; }

CACHE=$IMAGES_CACHE
VERSION=$(crate_version)
[ -n "$VERSION" ] || die "no version in Cargo.toml"
debian_require_tools
command -v musl-gcc >/dev/null ||
  die "musl-gcc is not on PATH; it compiles the pause binary and the operator's C parts" \
    "install it: apt-get install musl-tools"
take_lock

# The kubectl the kubectl-delivery image holds: see above.
control_plane_kubectl() {
  local found
  if [ -n "${MLKUBE_KUBECTL:-}" ]; then
    echo "$MLKUBE_KUBECTL"
    return
  fi
  # shellcheck disable=SC2012 # the cache's own paths, without newlines: ls -t finds the newest
  found=$(ls -t "${MLKUBE_CACHE:-$HOME/.cache/mlkube}"/controlplane/*/bin/kubectl 2>/dev/null | head -1)
  [ -n "$found" ] || die "no kubectl for the kubectl-delivery image" \
    "run cluster/local-cluster.sh up once (it builds the control plane), or set MLKUBE_KUBECTL"
  echo "$found"
}

SOURCES=$(mktemp -d)
trap 'rm -rf "$SOURCES"' EXIT
debian_sources "$SOURCES"
DEBIAN_SOURCES=$(cat "$SOURCES"/host.*)
EXAMPLES=(examples/training/*.py)
[ -f "${EXAMPLES[0]}" ] || EXAMPLES=()

if wanted pause; then
  cached_image pause "$PAUSE_TAG" image/pause/build.sh "$(musl-gcc --version | head -1)" \
    image/pause image/oci.sh
fi
if wanted mlkube; then operator_image; fi
if wanted training; then
  cached_image training "$VERSION" image/training/build.sh "$DEBIAN_SOURCES" \
    image/training image/oci.sh image/debian.sh "${EXAMPLES[@]}"
fi
if wanted notebook-hub; then
  cached_image notebook-hub "$VERSION" image/notebook-hub/build.sh "$DEBIAN_SOURCES" \
    image/notebook-hub image/oci.sh image/debian.sh
fi
if wanted kubectl-delivery; then
  KUBECTL=$(control_plane_kubectl)
  export KUBECTL
  cached_image kubectl-delivery "$VERSION" image/kubectl-delivery/build.sh \
    "$(musl-gcc --version | head -1) kubectl $(sha256sum "$KUBECTL" | awk '{print $1}')" \
    image/kubectl-delivery image/oci.sh
fi
if wanted busybox; then
  # Debian's busybox-static; the tag is its upstream version, the key the full package version.
  BUSYBOX_VERSION=$(apt-cache policy busybox-static 2>/dev/null | awk '/Candidate:/ {print $2}')
  BUSYBOX_TAG=${BUSYBOX_VERSION#*:}
  BUSYBOX_TAG=${BUSYBOX_TAG%%-*}
  { [ -n "$BUSYBOX_TAG" ] && [ "$BUSYBOX_VERSION" != "(none)" ]; } ||
    die "apt knows no busybox-static" "run apt-get update, and check that the host's apt sources have Debian main"
  cached_image busybox "$BUSYBOX_TAG" image/busybox/build.sh "$BUSYBOX_VERSION" image/busybox image/oci.sh
fi
if wanted object-store; then
  cached_image object-store "$VERSION" image/object-store/build.sh "$DEBIAN_SOURCES" \
    image/object-store image/oci.sh image/debian.sh
fi
if wanted dnsutils; then
  cached_image dnsutils "$VERSION" image/dnsutils/build.sh "$DEBIAN_SOURCES" \
    image/dnsutils image/oci.sh image/debian.sh
fi
if wanted serving; then
  cached_image serving "$VERSION" image/serving/build.sh "$DEBIAN_SOURCES" \
    image/serving image/oci.sh image/debian.sh
fi
if wanted gateway; then
  cached_image gateway "$VERSION" image/gateway/build.sh "$(go version 2>/dev/null)" image/gateway image/oci.sh
fi
