#!/usr/bin/env bash
# The whole test suite, as CI runs it (`.ci/run`) and as the README tells a newcomer:
# formatting, lints, the tests that need no cluster, then a local control plane of its own and
# the cluster tests against it. The control plane is stopped at the end, also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/mlkube/target}
# A cluster of its own, on its own ports, so a developer's `local-cluster.sh up` is left alone.
export MLKUBE_CLUSTER_DIR=${MLKUBE_TEST_CLUSTER_DIR:-${TMPDIR:-/tmp}/mlkube-test-cluster}
export MLKUBE_CLUSTER_PORT=${MLKUBE_TEST_CLUSTER_PORT:-17443}

step() { printf '\n== %s\n' "$*" >&2; }

for component in rustfmt clippy; do
  if ! rustup component list --installed 2>/dev/null | grep -q "^$component"; then
    step "installing the Rust component $component"
    rustup component add "$component"
  fi
done

step "cargo fmt --check"
cargo fmt --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets -- -D warnings

step "tests that need no cluster"
offline_tests=()
for file in tests/*.rs; do
  [ -e "$file" ] && offline_tests+=(--test "$(basename "$file" .rs)")
done
cargo test --lib --bins "${offline_tests[@]}"
cargo test --doc

step "the local control plane"
trap 'cluster/local-cluster.sh down' EXIT
cluster/local-cluster.sh up
eval "$(cluster/local-cluster.sh env)"

step "tests against the cluster"
cargo test --test cluster
