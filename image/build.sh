#!/usr/bin/env bash
# The operator image, built without a container daemon: a static mlkube binary (the musl target,
# so the image needs no C library) in a one-layer OCI image that runs as a non-root user with
# `mlkube operator` as its entrypoint, written as an OCI archive (a tar of an OCI image layout,
# see image/oci.sh) that `skopeo copy oci-archive:...` pushes to any registry and
# `ctr images import` imports as docker.io/mlkube/mlkube:<version>. The Dockerfile describes the
# same image for machines that have a daemon.
#
#   image/build.sh [ARCHIVE]    (default: $CARGO_TARGET_DIR/image/mlkube.oci.tar)
#
# The binary is a release build of its own (another target than `cargo install`'s), with the
# profile's debug info stripped, in a target directory of its own ($CARGO_TARGET_DIR/static),
# so that it and `cargo install` never rebuild each other's units; the first build takes about
# as long as a release build.
# Archives are reproducible: timestamps come from the last commit, and the binary holds neither
# a path of the machine that built it nor a build time. Checkouts of a commit that share a
# target directory (the default) get the same digest. Fresh target directories do too, but for
# one dependency: syn-dissect-closure (under jrsonnet-macros) orders a closure's captures by a
# HashSet, so jrsonnet's code differs from one compilation to the next until it is patched.
# An archive whose inputs (binary, scripts, commit time) are unchanged is not written again:
# ARCHIVE.key holds the digest of those inputs.
set -euo pipefail
CARGO_TARGET_DIR=$(realpath -m "${CARGO_TARGET_DIR:-$HOME/.cache/mlkube/target}")
export CARGO_TARGET_DIR
ARCHIVE=$(realpath -m "${1:-$CARGO_TARGET_DIR/image/mlkube.oci.tar}")
# The static build's own target directory. Shared with the host's release build, the two would
# invalidate each other: the host's build scripts and proc-macros (and what they depend on) are
# one unit for both, and what the static build sets in cargo's environment (SOURCE_DATE_EPOCH,
# watched by the cc crate's build scripts) would make each build rerun them for the other.
STATIC_TARGET_DIR=$CARGO_TARGET_DIR/static
# shellcheck source=SCRIPTDIR/oci.sh
source "$(dirname "$0")/oci.sh" # say, die, with_progress and the OCI layout
cd "$(dirname "$0")/.."

TARGET=x86_64-unknown-linux-musl
# The conventional "nonroot" user of distroless images: no shell, no passwd file, nothing to
# escalate with. The component's Deployment runs as the same user.
USER_ID=65532
METRICS_PORT=8080
HEALTH_PORT=8081

require_toolchain() {
  if ! rustup target list --installed 2>/dev/null | grep -qx "$TARGET"; then
    say "installing the Rust target $TARGET"
    rustup target add "$TARGET" || die "the Rust target $TARGET is missing" "rustup target add $TARGET"
  fi
  # ring and mimalloc compile C code, which must be built against musl's headers.
  command -v musl-gcc >/dev/null ||
    die "musl-gcc is not on PATH; it compiles the C parts of the static binary" \
      "install it: apt-get install musl-tools"
  oci_require_tools
}

# Rust's panic locations and C's __FILE__ name the files they were compiled from. cargo names
# this crate's files relative to the checkout, but its dependencies' by absolute paths under
# cargo's home (registry sources) and the target directory (build scripts' output), so those
# two are mapped to fixed prefixes, /cargo and /target, the same for any user and checkout.
# The flags are for the musl target only: the host's builds, and the build scripts here, keep
# their own and are not rebuilt for them. (Mapping the checkout too would put its path into
# the flags, and every checkout would rebuild every dependency.)
path_independent_flags() {
  local cargo_home
  # As cargo spells it: absolute, symbolic links not resolved.
  cargo_home=$(realpath -ms "${CARGO_HOME:-$HOME/.cargo}")
  local -a maps=("$cargo_home=/cargo" "$STATIC_TARGET_DIR=/target")
  # Stripped by a flag of the musl target's, not by the release profile: a profile setting
  # would also strip the host's build scripts and proc-macros, for nothing.
  local map rust_flags=(-Cstrip=symbols) c_flags=()
  for map in "${maps[@]}"; do
    rust_flags+=("--remap-path-prefix=$map")
    c_flags+=("-ffile-prefix-map=$map")
  done
  # Separated by 0x1f, so that paths with spaces stay whole.
  CARGO_ENCODED_RUSTFLAGS=$(IFS=$'\x1f' && echo "${rust_flags[*]}")
  export CARGO_ENCODED_RUSTFLAGS
  export CFLAGS_x86_64_unknown_linux_musl="${c_flags[*]}"
}

# mimalloc's C code prints the __DATE__ and __TIME__ it was compiled at; gcc takes them from
# SOURCE_DATE_EPOCH when it is set. The time of the last change to Cargo.lock changes only with
# the dependencies, so their C code is not rebuilt for every commit (cc reruns when it changes).
dependencies_epoch() {
  git log -1 --format=%ct -- Cargo.lock 2>/dev/null | grep . || echo 0
}

build_binary() {
  say "building the static binary (cargo build --release --target $TARGET)"
  path_independent_flags
  # Without a workspace wrapper (cluster/run-tests.sh sets clippy-driver for the tests' build):
  # a wrapper that came and went would rebuild this crate.
  CARGO_TARGET_DIR=$STATIC_TARGET_DIR SOURCE_DATE_EPOCH=$(dependencies_epoch) \
    with_progress "the static binary" \
    env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS cargo build --quiet --locked --release --target "$TARGET" --bin mlkube
  BINARY=$STATIC_TARGET_DIR/$TARGET/release/mlkube
  VERSION=$("$BINARY" --version | awk '{print $2}')
  [ -n "$VERSION" ] || die "$BINARY --version printed no version"
}

# The one layer: /usr/local/bin/mlkube, owned by root and not writable by the user it runs as.
write_image() {
  local rootfs=$WORK/rootfs
  install -D -m 0755 "$BINARY" "$rootfs/usr/local/bin/mlkube"
  oci_layer "$rootfs" "$WORK/layer.tar" root
  oci_archive "$ARCHIVE" "docker.io/mlkube/mlkube:$VERSION" "$(run_config)" "$WORK/layer.tar"
}

run_config() {
  cat <<CONFIG
{
    "User": "$USER_ID:$USER_ID",
    "Env": ["PATH=/usr/local/bin:/usr/bin:/bin"],
    "Entrypoint": ["/usr/local/bin/mlkube", "operator"],
    "ExposedPorts": {"$METRICS_PORT/tcp": {}, "$HEALTH_PORT/tcp": {}},
    "Labels": {
      "org.opencontainers.image.title": "mlkube",
      "org.opencontainers.image.version": "$VERSION",
      "org.opencontainers.image.licenses": "Apache-2.0"
    }
  }
CONFIG
}

require_toolchain
build_binary
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
KEY=$(cat "$BINARY" image/build.sh image/oci.sh <(echo "$VERSION $SOURCE_DATE_EPOCH") | sha256sum | awk '{print $1}')
if [ -f "$ARCHIVE" ] && [ "$(cat "$ARCHIVE.key" 2>/dev/null)" = "$KEY" ]; then
  say "$ARCHIVE is up to date"
  exit 0
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
rm -f "$ARCHIVE.key"
write_image
echo "$KEY" >"$ARCHIVE.key"
