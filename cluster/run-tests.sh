#!/usr/bin/env bash
# The whole test suite, as CI runs it (`.ci/run`) and as the README tells a newcomer: the shell
# scripts checked by shellcheck, formatting, lints, the tests that need no cluster, the operator
# image (image/build.sh), then a local control plane of its own with kwok's simulated nodes, the
# cluster tests and the image's tests against it; then the same control plane with two real
# nodes that pull from the cluster's registry (root only: it needs network namespaces, cgroups
# and mounts), the real-node tests on them, the loss of a node, and a check that its `down` left
# nothing behind. Each cluster is stopped at the end, also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/mlkube/target}
# A cluster of its own, on its own ports, so a developer's `local-cluster.sh up` is left alone.
export MLKUBE_CLUSTER_DIR=${MLKUBE_TEST_CLUSTER_DIR:-${TMPDIR:-/tmp}/mlkube-test-cluster}
export MLKUBE_CLUSTER_PORT=${MLKUBE_TEST_CLUSTER_PORT:-17443}

# Each step says when it began (minutes and seconds into the run), so a slow run shows where.
step() { printf '\n== [%dm%02ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*" >&2; }

for component in rustfmt clippy; do
  if ! rustup component list --installed 2>/dev/null | grep -q "^$component"; then
    step "installing the Rust component $component"
    rustup component add "$component"
  fi
done

# The image's static binary needs musl's C compiler, its test reads the archive with skopeo, and
# the shell scripts are checked with Debian's shellcheck.
missing=()
command -v musl-gcc >/dev/null || missing+=(musl-tools)
command -v skopeo >/dev/null || missing+=(skopeo)
command -v shellcheck >/dev/null || missing+=(shellcheck)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    step "installing ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  else
    echo "run-tests: error: ${missing[*]} missing; install with: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi

# Each background build runs in a process group of its own, which a failed run stops.
background=()
stop_background() {
  local group
  for group in "${background[@]}"; do kill -- -"$group" 2>/dev/null || true; done
}
trap stop_background EXIT
# in_background LOG NICENESS COMMAND: COMMAND (a line of bash) runs at that priority in a
# session and process group of its own, its output in LOG; the group is the last of `background`.
# Where the kernel groups each session's tasks for the scheduler (sched_autogroup), the session
# gets the niceness too: else it would get as much CPU as the foreground's whole session.
in_background() {
  local log=$1 niceness=$2
  # shellcheck disable=SC2016 # expanded by the inner bash
  setsid bash -c 'echo "$1" >/proc/self/autogroup 2>/dev/null; exec nice -n "$1" bash -c "$2"' \
    background "$niceness" "$3" >"$log" 2>&1 &
  background+=("$!")
}
# hurry GROUP: the foreground needs what that group builds from now on: normal priority.
hurry() {
  renice -n 0 -g "$1" >/dev/null 2>&1 || true
  echo 0 >"/proc/$1/autogroup" 2>/dev/null || true
}
# wait_for NAME GROUP LOG: the foreground waits for that build, at normal priority.
wait_for() {
  hurry "$2"
  wait "$2" || echo "run-tests: the background build of $1 failed (see $3); the next step builds again" >&2
}

# As root, what the clusters need builds in the background from the start, in the time the Rust
# builds leave (downloads, cargo's serial steps, the tests' runs) and while the kwok tests mostly
# wait on the cluster: the control plane; and the real nodes' Debian images (mostly downloads
# and unpacking) beside their Go parts (CoreDNS, local-path-provisioner, the registry, flannel,
# SeaweedFS and Traefik: 20 to 30 minutes cold on 2 cores, nothing once cached), then the images
# pushed into the registry's kept storage and pulled into the nodes' kept stores, so that their
# `up` has little left to do: the Debian images while SeaweedFS and Traefik build (pulls are
# mostly unpacking, which leaves the CPU to the compiler), then the two that need those. The
# cluster's `up` builds, pushes and pulls whatever is missing, so without root (no real node)
# the control plane builds there.
logs=${TMPDIR:-/tmp}/mlkube-test
if [ "$(id -u)" -eq 0 ]; then
  step "building the control plane and the real node's parts in the background (logs: $logs-*.log)"
  in_background "$logs-controlplane.log" 15 'cluster/local-cluster.sh build'
  controlplane=${background[-1]}
  # The serving image first: the image tests, right after the kwok tests, need it.
  images="pause training notebook-hub busybox dnsutils"
  in_background "$logs-node.log" 15 "
    { cluster/local-cluster.sh node-tools && image/node-images.sh serving >/dev/null &&
      image/node-images.sh $images >/dev/null; } >'$logs-images.log' 2>&1 &
    cluster/local-cluster.sh build-node && wait \$! &&
      { cluster/local-cluster.sh preload serving $images & } &&
      image/object-store/build.sh --binary && image/gateway/build.sh --binary && wait \$! &&
      cluster/local-cluster.sh preload object-store gateway"
  node=${background[-1]}
fi

# The project's shell scripts: the files git tracks or would (not ignored) that end in .sh or
# start with a shell's #!.
shell_scripts() {
  local file first shebang='^#!.*[/ ](ba)?sh( |$)'
  while IFS= read -r -d '' file; do
    [ -f "$file" ] || continue
    first=
    [[ $file == *.sh ]] || IFS= read -r -n 128 first <"$file" || true
    if [[ $file == *.sh || $first =~ $shebang ]]; then echo "$file"; fi
  done < <(git ls-files -z --cached --others --exclude-standard)
}
mapfile -t scripts < <(shell_scripts)
step "shellcheck (${#scripts[@]} shell scripts)"
shellcheck "${scripts[@]}"

step "cargo fmt --check"
cargo fmt --check

# Clippy's lints run inside the tests' build: clippy-driver compiles this crate's every target
# as the workspace's compiler wrapper, as `cargo clippy` runs it under `cargo check`, with the
# same arguments (`-D warnings`, in clippy's own encoding). One compilation of the crate and its
# targets instead of two, and no check-only build of every dependency: cold, `cargo clippy
# --all-targets` alone took 489 CPU-seconds. Every `cargo test` below runs the same way, or cargo
# would build the crate again for the changed wrapper; image/build.sh's static build does not.
RUSTC_WORKSPACE_WRAPPER=$(rustup which clippy-driver)
export RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
step "clippy's lints, in the build of every target (cargo test --all-targets --no-run)"
cargo test --all-targets --no-run

step "tests that need no cluster"
offline_tests=()
for file in tests/*.rs; do
  [ -e "$file" ] && offline_tests+=(--test "$(basename "$file" .rs)")
done
cargo test --lib --bins "${offline_tests[@]}"
cargo test --doc

step "the operator image (image/build.sh)"
image/build.sh

if [ -n "${controlplane:-}" ]; then
  step "waiting for the control plane's build"
  wait_for "the control plane" "$controlplane" "$logs-controlplane.log"
fi
step "the local control plane"
trap 'stop_background; cluster/local-cluster.sh down' EXIT
cluster/local-cluster.sh up
eval "$(cluster/local-cluster.sh env)"

step "tests against the cluster"
cargo test --test cluster

# The image tests need the serving image, and the real node all that the background builds.
[ -z "${node:-}" ] || hurry "$node"
step "the operator image against the cluster"
cargo test --test image
cluster/local-cluster.sh down

if [ "$(id -u)" -ne 0 ]; then
  echo "run-tests: error: the real-node tests need root (a network namespace, cgroups, mounts)" >&2
  echo "  hint: run this as root, e.g. sudo -E cluster/run-tests.sh" >&2
  exit 1
fi
step "waiting for the real node's parts"
wait_for "the real node's parts" "$node" "$logs-node.log (and $logs-images.log)"
step "the local control plane with real nodes (MLKUBE_CLUSTER_NODE=real, 2 nodes)"
MLKUBE_CLUSTER_NODE=real cluster/local-cluster.sh up
# The real nodes' environment adds the host's addresses of the gateway (MLKUBE_GATEWAY_URL) and
# of the registry (MLKUBE_REGISTRY).
eval "$(MLKUBE_CLUSTER_NODE=real cluster/local-cluster.sh env)"

# Three at a time: two left the CPU half idle, as the tests mostly wait on pods.
step "tests on the real nodes"
cargo test --test real_node -- --test-threads 3

# Then, alone, what takes a node away from everything else on it: a drain, with requests
# flowing through the gateway (ignored in the run above for that reason, run here), and the loss
# of a node.
step "a drain of a node under load"
cargo test --test real_node -- --ignored --nocapture drain
step "the loss of a node"
cargo test --test node_loss -- --nocapture

step "the real nodes' down leaves nothing behind but the stores it names"
said=$(cluster/local-cluster.sh down 2>&1) || { echo "$said" >&2; exit 1; }
echo "$said" >&2
grep -q "^local-cluster: kept for the next up on port $MLKUBE_CLUSTER_PORT: .*, [0-9.]*[KMGT]; free them with: rm -rf " <<<"$said" || {
  echo "run-tests: error: down did not say what it keeps for the next up and how to free it" >&2
  exit 1
}
trap - EXIT
cluster/local-cluster.sh leftovers
