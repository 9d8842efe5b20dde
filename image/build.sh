#!/usr/bin/env bash
# The operator image, built without a container daemon: a static mlkube binary (the musl target,
# so the image needs no C library) in a one-layer OCI image that runs as a non-root user with
# `mlkube operator` as its entrypoint, written as an OCI archive (a tar of an OCI image layout)
# that `skopeo copy oci-archive:...` pushes to any registry. The Dockerfile describes the same
# image for machines that have a daemon.
#
#   image/build.sh [ARCHIVE]    (default: $CARGO_TARGET_DIR/image/mlkube.oci.tar)
#
# The binary is a release build of its own (another target than `cargo install`'s), with the
# profile's debug info stripped; the first build takes about as long as a release build.
# Archives are reproducible: timestamps come from the last commit, so the same source gives the
# same image digest.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/mlkube/target}
TARGET=x86_64-unknown-linux-musl
ARCHIVE=${1:-$CARGO_TARGET_DIR/image/mlkube.oci.tar}
# The conventional "nonroot" user of distroless images: no shell, no passwd file, nothing to
# escalate with. The component's Deployment runs as the same user.
USER_ID=65532
METRICS_PORT=8080
HEALTH_PORT=8081

say() { printf 'image: %s\n' "$*" >&2; }
die() {
  printf 'image: error: %s\n' "$1" >&2
  shift
  for hint in "$@"; do printf '  hint: %s\n' "$hint" >&2; done
  exit 1
}

require_toolchain() {
  if ! rustup target list --installed 2>/dev/null | grep -qx "$TARGET"; then
    say "installing the Rust target $TARGET"
    rustup target add "$TARGET" || die "the Rust target $TARGET is missing" "rustup target add $TARGET"
  fi
  # ring and mimalloc compile C code, which must be built against musl's headers.
  command -v musl-gcc >/dev/null ||
    die "musl-gcc is not on PATH; it compiles the C parts of the static binary" \
      "install it: apt-get install musl-tools"
  command -v sha256sum >/dev/null && command -v gzip >/dev/null && command -v tar >/dev/null ||
    die "sha256sum, gzip and GNU tar are needed to write the image"
}

build_binary() {
  say "building the static binary (cargo build --release --target $TARGET)"
  CARGO_PROFILE_RELEASE_STRIP=symbols cargo build --quiet --locked --release --target "$TARGET" --bin mlkube
  BINARY=$CARGO_TARGET_DIR/$TARGET/release/mlkube
  VERSION=$("$BINARY" --version | awk '{print $2}')
  [ -n "$VERSION" ] || die "$BINARY --version printed no version"
}

digest() { sha256sum "$1" | awk '{print $1}'; }
size() { stat -c %s "$1"; }

# The one layer: /usr/local/bin/mlkube, owned by root and not writable by the user it runs as.
write_layer() {
  local root=$WORK/rootfs
  install -D -m 0755 "$BINARY" "$root/usr/local/bin/mlkube"
  tar --create --file "$WORK/layer.tar" --directory "$root" --sort=name --numeric-owner \
    --owner=0 --group=0 --mtime="@$EPOCH" --format=posix --pax-option=delete=atime,delete=ctime usr
  gzip -9 --no-name --stdout "$WORK/layer.tar" >"$WORK/layer.tar.gz"
}

write_blob() {
  local file=$1 sum
  sum=$(digest "$file")
  mkdir -p "$LAYOUT/blobs/sha256"
  cp "$file" "$LAYOUT/blobs/sha256/$sum"
  echo "$sum"
}

write_image() {
  local created layer layer_diff config manifest
  created=$(date -u -d "@$EPOCH" +%Y-%m-%dT%H:%M:%SZ)
  layer=$(write_blob "$WORK/layer.tar.gz")
  layer_diff=$(digest "$WORK/layer.tar")
  cat >"$WORK/config.json" <<CONFIG
{
  "created": "$created",
  "architecture": "amd64",
  "os": "linux",
  "config": {
    "User": "$USER_ID:$USER_ID",
    "Env": ["PATH=/usr/local/bin:/usr/bin:/bin"],
    "Entrypoint": ["/usr/local/bin/mlkube", "operator"],
    "ExposedPorts": {"$METRICS_PORT/tcp": {}, "$HEALTH_PORT/tcp": {}},
    "Labels": {
      "org.opencontainers.image.title": "mlkube",
      "org.opencontainers.image.version": "$VERSION",
      "org.opencontainers.image.licenses": "Apache-2.0"
    }
  },
  "rootfs": {"type": "layers", "diff_ids": ["sha256:$layer_diff"]},
  "history": [{"created": "$created", "created_by": "image/build.sh"}]
}
CONFIG
  config=$(write_blob "$WORK/config.json")
  cat >"$WORK/manifest.json" <<MANIFEST
{
  "schemaVersion": 2,
  "mediaType": "application/vnd.oci.image.manifest.v1+json",
  "config": {
    "mediaType": "application/vnd.oci.image.config.v1+json",
    "digest": "sha256:$config",
    "size": $(size "$WORK/config.json")
  },
  "layers": [{
    "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
    "digest": "sha256:$layer",
    "size": $(size "$WORK/layer.tar.gz")
  }]
}
MANIFEST
  manifest=$(write_blob "$WORK/manifest.json")
  cat >"$LAYOUT/index.json" <<INDEX
{
  "schemaVersion": 2,
  "mediaType": "application/vnd.oci.image.index.v1+json",
  "manifests": [{
    "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "digest": "sha256:$manifest",
    "size": $(size "$WORK/manifest.json"),
    "annotations": {"org.opencontainers.image.ref.name": "$VERSION"}
  }]
}
INDEX
  echo '{"imageLayoutVersion": "1.0.0"}' >"$LAYOUT/oci-layout"
  mkdir -p "$(dirname "$ARCHIVE")"
  tar --create --file "$ARCHIVE.partial" --directory "$LAYOUT" --sort=name --numeric-owner \
    --owner=0 --group=0 --mtime="@$EPOCH" --format=posix --pax-option=delete=atime,delete=ctime .
  mv "$ARCHIVE.partial" "$ARCHIVE"
  say "wrote $ARCHIVE: mlkube $VERSION, manifest sha256:$manifest, $(($(size "$ARCHIVE") / 1024 / 1024)) MiB"
}

require_toolchain
build_binary
EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
LAYOUT=$WORK/layout
mkdir -p "$LAYOUT"
write_layer
write_image
