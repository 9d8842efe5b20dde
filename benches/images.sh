#!/usr/bin/env bash
# Image distribution, side by side: the platform's images put on NODES nodes (default 2) by
# importing each OCI archive into each node's containerd (what the local cluster did before it
# had a registry), against pushing them once to a registry (CNCF Distribution's, with skopeo)
# and pulling them on every node at once (what the local cluster does now, and any cluster).
#
#   benches/images.sh            # as root; a Markdown table on stdout, progress on stderr
#   NODES=3 ROUNDS=3 benches/images.sh
#
# Every round starts from empty stores: a registry and NODES containerds of the bench's own, on
# 127.0.0.1 and in a temporary directory (removed at the end), from the images
# image/node-images.sh builds (built first if missing). Per round:
#   import     each archive imported (`ctr images import`) into each node's store, node after
#              node, as `up` did for its one node
#   push       each archive pushed to the empty registry (`skopeo copy`), once
#   pull       every image pulled (`ctr images pull`) on every node, the nodes at once
# The two ways alternate first from round to round (ROUNDS, default 2), so that the machine's
# drift falls on both alike; the table gives the medians and the ratios to the import.
set -euo pipefail
cd "$(dirname "$0")/.."

NODES=${NODES:-2}
ROUNDS=${ROUNDS:-2}
CACHE_ROOT=${MLKUBE_CACHE:-$HOME/.cache/mlkube}
REGISTRY_BIN=$CACHE_ROOT/registry-v3.1.2/bin/registry
say() { printf 'bench images: %s\n' "$*" >&2; }
die() { printf 'bench images: error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "it runs containerd: run it as root"
[ -x "$REGISTRY_BIN" ] || die "no registry at $REGISTRY_BIN: run cluster/local-cluster.sh build-node first"
work=$(mktemp -d /var/tmp/mlkube-bench-images.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  umount -R "$work" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

say "building the images (image/node-images.sh)"
image/node-images.sh >"$work/images.list"
mib=$(awk '{print $2}' "$work/images.list" | xargs stat -c %s | awk '{s += $1} END {printf "%d", s / 1048576}')
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# A fresh containerd for NAME (its store, state and socket under $work/NAME), without the CRI.
start_containerd() {
  local dir=$work/$1
  mkdir -p "$dir/certs.d/docker.io"
  printf 'server = "http://127.0.0.1:%s"\n[host."http://127.0.0.1:%s"]\n  capabilities = ["pull", "resolve"]\n' \
    "$port" "$port" >"$dir/certs.d/docker.io/hosts.toml"
  cat >"$dir/config.toml" <<CONFIG
version = 2
root = "$dir/root"
state = "$dir/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$dir/sock"
CONFIG
  containerd --config "$dir/config.toml" >"$dir/log" 2>&1 &
  pids+=("$!")
  until ctr --address "$dir/sock" version >/dev/null 2>&1; do sleep 0.1; done
}

# A fresh registry on 127.0.0.1:$port, storing under $work/registry.
start_registry() {
  mkdir -p "$work/registry"
  printf 'version: 0.1\nlog: {level: warn}\nstorage: {filesystem: {rootdirectory: %s}}\nhttp: {addr: "127.0.0.1:%s"}\n' \
    "$work/registry" "$port" >"$work/registry.yaml"
  "$REGISTRY_BIN" serve "$work/registry.yaml" >"$work/registry.log" 2>&1 &
  pids+=("$!")
  until curl -fsS "http://127.0.0.1:$port/v2/" >/dev/null 2>&1; do sleep 0.1; done
}

# Everything of the last round stopped and removed.
reset() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
  umount -R "$work"/node-* 2>/dev/null || true
  rm -rf "$work"/node-* "$work/registry"
}

ctr_on() { ctr --address "$work/$1/sock" --namespace k8s.io "${@:2}"; }

# Seconds (to the millisecond) COMMAND... takes.
timed() {
  local start
  start=$(date +%s.%N)
  "$@" >>"$work/commands.log" 2>&1 || die "$* failed; see $work/commands.log"
  awk -v start="$start" -v end="$(date +%s.%N)" 'BEGIN {printf "%.1f\n", end - start}'
}

import_all() {
  local k ref archive
  for k in $(seq 1 "$NODES"); do
    while read -r ref archive; do ctr_on "node-$k" images import --base-name "${ref%:*}" "$archive"; done <"$work/images.list"
  done
}

push_all() {
  local ref archive
  while read -r ref archive; do
    skopeo copy --quiet --dest-tls-verify=false "oci-archive:$archive" "docker://127.0.0.1:$port/${ref#docker.io/}"
  done <"$work/images.list"
}

pull_all() {
  local k ref archive jobs=()
  for k in $(seq 1 "$NODES"); do
    (while read -r ref archive; do
      ctr_on "node-$k" images pull --hosts-dir "$work/node-$k/certs.d" "$ref"
    done <"$work/images.list") &
    jobs+=("$!")
  done
  for k in "${jobs[@]}"; do wait "$k" || return 1; done
}

fresh_nodes() {
  local k
  for k in $(seq 1 "$NODES"); do start_containerd "node-$k"; done
}

round_import() {
  reset
  fresh_nodes
  timed import_all >>"$work/import.times"
}

round_registry() {
  reset
  fresh_nodes
  start_registry
  timed push_all >>"$work/push.times"
  timed pull_all >>"$work/pull.times"
}

median() { sort -n "$1" | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

for round in $(seq 1 "$ROUNDS"); do
  say "round $round of $ROUNDS ($(wc -l <"$work/images.list") images, $mib MiB of archives, $NODES nodes)"
  if [ $((round % 2)) = 1 ]; then round_import; round_registry; else round_registry; round_import; fi
done
reset

import=$(median "$work/import.times")
push=$(median "$work/push.times")
pull=$(median "$work/pull.times")
both=$(awk -v a="$push" -v b="$pull" 'BEGIN {printf "%.1f", a + b}')
ratio() { awk -v t="$1" -v i="$import" 'BEGIN {printf "%.2f", t / i}'; }
echo "| $NODES nodes, $(wc -l <"$work/images.list") images ($mib MiB) | seconds (median of $ROUNDS) | / import |"
echo "|---|---|---|"
echo "| import into each node, node after node (before) | $import | 1.00 |"
echo "| push once to the registry | $push | $(ratio "$push") |"
echo "| pull on every node at once | $pull | $(ratio "$pull") |"
echo "| push + pull (now) | $both | $(ratio "$both") |"
