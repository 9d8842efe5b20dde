# shellcheck shell=bash
# The one place that writes OCI images, sourced by every image script: a layer from a directory,
# then blobs, config, manifest and index packed as an OCI archive (a tar of an OCI image layout)
# that `skopeo copy oci-archive:...` reads and `ctr images import` imports under its full name.
#
#   oci_layer ROOTFS LAYER_TAR [keep|root]
#   oci_archive ARCHIVE REF RUN_CONFIG_JSON LAYER_TAR...
#
# and the frame every image/<name>/build.sh ARCHIVE REF shares, in its order:
#
#   oci_arguments USAGE ARGS...       ARCHIVE and REF from the script's arguments
#   oci_begin                         tools, SOURCE_DATE_EPOCH and WORK, a scratch directory
#                                     (debian_begin in image/debian.sh for the Debian images)
#   oci_labels TITLE [DESCRIPTION]    the run config's labels (version: REF's tag)
#   oci_image keep|root RUN_CONFIG_JSON  $WORK/rootfs in one layer, written as ARCHIVE
#
# Reproducible: entries sorted by name, mtimes clamped to $SOURCE_DATE_EPOCH (older files, such
# as those unpacked from Debian packages, keep theirs), no atime, ctime or PID in the headers,
# compression without a name or time. A Debian root file system keeps its numeric owners (a
# home directory owned by uid 1000 must stay so in the image); `root` makes every file root's,
# for images staged by a user who is not root.
#
# Layers are gzip-compressed, which every tool reads; OCI_COMPRESSION=zstd makes large ones
# smaller and three times faster to write (containerd reads zstd since 1.5, skopeo too).
#
# Needs GNU tar, gzip (or zstd) and sha256sum; the caller sets SOURCE_DATE_EPOCH.
OCI_COMPRESSION=${OCI_COMPRESSION:-gzip}

# What the image's history says made it: the calling script, by its path in the repository
# (never the checkout's absolute path, which would make the image depend on where it was built).
# Scripts source this file before they change directory.
OCI_CREATED_BY=$(realpath --relative-to="$(dirname "${BASH_SOURCE[0]}")/.." "$0")

say() { printf 'image: %s\n' "$*" >&2; }
die() {
  printf 'image: error: %s\n' "$1" >&2
  shift
  for hint in "$@"; do printf '  hint: %s\n' "$hint" >&2; done
  exit 1
}
# shellcheck source=SCRIPTDIR/progress.sh
source "$(dirname "${BASH_SOURCE[0]}")/progress.sh" # with_progress: a line a minute while a build runs

oci_require_tools() {
  local tool
  for tool in tar "$OCI_COMPRESSION" sha256sum; do
    command -v "$tool" >/dev/null || die "$tool is not on PATH; it is needed to write images" \
      "install it: apt-get install tar $OCI_COMPRESSION coreutils"
  done
}

oci_digest() { sha256sum "$1" | awk '{print $1}'; }
oci_size() { stat -c %s "$1"; }

# A layer holding everything under ROOTFS. The contents of dev, proc and sys are left out: the
# runtime mounts its own there.
oci_layer() {
  local rootfs=$1 layer=$2 owners=${3:-keep}
  local -a entries owner_args=(--numeric-owner)
  [ "$owners" = root ] && owner_args+=(--owner=0 --group=0)
  mapfile -t entries < <(cd "$rootfs" && find . -mindepth 1 -maxdepth 1 -printf '%P\n' | LC_ALL=C sort)
  [ "${#entries[@]}" -gt 0 ] || die "$rootfs is empty: no layer to write"
  tar --create --file "$layer" --directory "$rootfs" --sort=name "${owner_args[@]}" \
    --mtime="@$SOURCE_DATE_EPOCH" --clamp-mtime --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    --anchored --exclude='dev/?*' --exclude='proc/?*' --exclude='sys/?*' \
    -- "${entries[@]}"
}

# LAYER compressed into LAYER.gzip or LAYER.zstd, as $OCI_COMPRESSION says; LAYER is removed.
# zstd's output is the same whatever the number of threads.
oci_compress() {
  local layer=$1
  case $OCI_COMPRESSION in
    gzip) gzip -6 --no-name --stdout "$layer" >"$layer.gzip" ;;
    zstd) zstd --quiet --threads=0 -8 --stdout "$layer" >"$layer.zstd" ;;
    *) die "OCI_COMPRESSION is $OCI_COMPRESSION" "use gzip or zstd" ;;
  esac
  rm -f "$layer"
}

# Moves FILE into the layout's blobs under its digest and prints the digest.
oci_blob() {
  local file=$1 sum
  sum=$(oci_digest "$file")
  mkdir -p "$OCI_LAYOUT/blobs/sha256"
  mv "$file" "$OCI_LAYOUT/blobs/sha256/$sum"
  echo "$sum"
}

# The descriptor of a blob already in the layout, with the annotations given as JSON members.
oci_descriptor() {
  local media_type=$1 sum=$2 annotations=${3:-} extra=''
  [ -z "$annotations" ] || extra=", \"annotations\": {$annotations}"
  printf '{"mediaType": "%s", "digest": "sha256:%s", "size": %s%s}' \
    "$media_type" "$sum" "$(oci_size "$OCI_LAYOUT/blobs/sha256/$sum")" "$extra"
}

# Joins its arguments with ", ".
oci_join() {
  local IFS=$'\x1f'
  local joined="$*"
  echo "${joined//$'\x1f'/, }"
}

# ARCHIVE: an OCI archive of one image named REF (registry/repository:tag) whose config runs as
# RUN_CONFIG_JSON says (the "config" object of the image config: User, Env, Entrypoint, ...),
# with the given uncompressed layer tars as its layers, bottom first. The tars are consumed; the
# layout is assembled beside the first, in the caller's scratch directory.
oci_archive() {
  local archive=$1 ref=$2 run_config=$3
  shift 3
  local tag=${ref##*:} created layer sum config manifest
  local -a diff_ids=() layers=() history=()
  { [ "$tag" != "$ref" ] && [[ $tag != */* ]]; } || die "image reference $ref has no tag"
  [ $# -gt 0 ] || die "no layers for $ref"
  created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
  # Beside the first layer, so that the blobs are moved, not copied.
  OCI_LAYOUT=$(mktemp -d "$(dirname "$1")/layout.XXXXXX")
  for layer in "$@"; do
    diff_ids+=("\"sha256:$(oci_digest "$layer")\"")
    oci_compress "$layer"
    sum=$(oci_blob "$layer.$OCI_COMPRESSION")
    layers+=("$(oci_descriptor "application/vnd.oci.image.layer.v1.tar+$OCI_COMPRESSION" "$sum")")
    history+=("{\"created\": \"$created\", \"created_by\": \"$OCI_CREATED_BY\"}")
  done
  config=$(oci_write_config "$created" "$run_config" "$(oci_join "${diff_ids[@]}")" \
    "$(oci_join "${history[@]}")")
  manifest=$(oci_write_manifest "$config" "$(oci_join "${layers[@]}")")
  oci_write_index "$manifest" "$ref" "$tag"
  oci_pack "$archive"
  say "wrote $archive: $ref, manifest sha256:$manifest, $(numfmt --to=iec --suffix=B "$(oci_size "$archive")")"
}

# The image config blob; prints its digest.
oci_write_config() {
  local created=$1 run_config=$2 diff_ids_json=$3 history_json=$4
  printf '{\n  "created": "%s",\n  "architecture": "amd64",\n  "os": "linux",\n  "config": %s,\n  "rootfs": {"type": "layers", "diff_ids": [%s]},\n  "history": [%s]\n}\n' \
    "$created" "$run_config" "$diff_ids_json" "$history_json" >"$OCI_LAYOUT/config.json"
  oci_blob "$OCI_LAYOUT/config.json"
}

# The manifest blob of the config and the layers' descriptors; prints its digest.
oci_write_manifest() {
  local config=$1 layers_json=$2
  printf '{\n  "schemaVersion": 2,\n  "mediaType": "application/vnd.oci.image.manifest.v1+json",\n  "config": %s,\n  "layers": [%s]\n}\n' \
    "$(oci_descriptor application/vnd.oci.image.config.v1+json "$config")" "$layers_json" \
    >"$OCI_LAYOUT/manifest.json"
  oci_blob "$OCI_LAYOUT/manifest.json"
}

# index.json names the image twice: by its tag (org.opencontainers.image.ref.name, what skopeo's
# `oci-archive:ARCHIVE:TAG` selects) and by its full name (io.containerd.image.name, what
# `ctr images import` names it, with no --base-name needed).
oci_write_index() {
  local manifest=$1 ref=$2 tag=$3
  local names="\"io.containerd.image.name\": \"$ref\", \"org.opencontainers.image.ref.name\": \"$tag\""
  printf '{\n  "schemaVersion": 2,\n  "mediaType": "application/vnd.oci.image.index.v1+json",\n  "manifests": [%s]\n}\n' \
    "$(oci_descriptor application/vnd.oci.image.manifest.v1+json "$manifest" "$names")" \
    >"$OCI_LAYOUT/index.json"
  echo '{"imageLayoutVersion": "1.0.0"}' >"$OCI_LAYOUT/oci-layout"
}

# The layout as ARCHIVE, replaced at once: a reader never sees half an archive.
oci_pack() {
  local archive=$1
  mkdir -p "$(dirname "$archive")"
  tar --create --file "$archive.partial" --directory "$OCI_LAYOUT" --sort=name --numeric-owner \
    --owner=0 --group=0 --mtime="@$SOURCE_DATE_EPOCH" --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime oci-layout index.json blobs
  rm -rf "$OCI_LAYOUT"
  mv "$archive.partial" "$archive"
}

# ---------------------------------------------------------------------------------------------
# the frame of an image's build script

# ARCHIVE (absolute, as the script may change directory after) and REF from a build script's
# arguments, ARCHIVE REF; else the script's USAGE, and exit 2.
oci_arguments() {
  local usage=$1
  shift
  [ $# -eq 2 ] || { echo "usage: $usage" >&2; exit 2; }
  ARCHIVE=$(realpath -m "$1")
  REF=$2
}

# The tools checked, SOURCE_DATE_EPOCH exported (0 unless the caller set it), and WORK, a
# scratch directory removed when the script exits.
oci_begin() {
  oci_require_tools
  export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-0}
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
}

# The "Labels" member every run config ends with: the image's TITLE, its version (REF's tag)
# and DESCRIPTION, if any, indented as the build scripts' run configs are.
oci_labels() {
  local title=$1 description=${2:-}
  printf '    "Labels": {\n      "org.opencontainers.image.title": "%s",\n' "$title"
  printf '      "org.opencontainers.image.version": "%s"' "${REF##*:}"
  [ -z "$description" ] || printf ',\n      "org.opencontainers.image.description": "%s"' "$description"
  printf '\n    }\n'
}

# The image ARCHIVE, named REF: $WORK/rootfs in one layer (OWNERS: keep or root, as oci_layer
# takes them) with RUN_CONFIG.
oci_image() {
  local owners=$1 run_config=$2
  say "packing the layer"
  oci_layer "$WORK/rootfs" "$WORK/layer.tar" "$owners"
  oci_archive "$ARCHIVE" "$REF" "$run_config" "$WORK/layer.tar"
}
