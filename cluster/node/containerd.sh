# shellcheck shell=bash
# containerd of the node use_node chose: its configuration (its registries: every name the
# cluster's images go by leads to the cluster's registry), and the node's images pulled into its
# kept image store (at `up`, or ahead with `preload`). Sourced by cluster/real-node.sh.

write_containerd_config() {
  local restrict_oom=false
  lacks_sys_resource && restrict_oom=true
  mkdir -p "$NODE_DIR/cni" "$CONTAINERD_ROOT"
  write_registry_hosts "${1:-$REGISTRY_ADDRESS}"
  cat >"$NODE_DIR/containerd.toml" <<CONTAINERD
version = 2
root = "$CONTAINERD_ROOT"
state = "$NODE_DIR/containerd"

[grpc]
  address = "$CONTAINERD_SOCKET"

[ttrpc]
  address = "$NODE_DIR/containerd.sock.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "$NODE_DIR/containerd-opt"

[plugins."io.containerd.grpc.v1.cri"]
  # Pulled from the cluster's registry, as every image.
  sandbox_image = "$PAUSE_IMAGE"
  # Without CAP_SYS_RESOURCE, lowering a sandbox's oom_score_adj fails every pod.
  restrict_oom_score_adj = $restrict_oom
  # Pods' network namespaces are mounted under the state dir, which \`down\` unmounts.
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    # The kubelet's pulls keep only what they unpacked, as the preload's (discard_unpacked_layers).
    discard_unpacked_layers = true
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "$NODE_DIR/runc"
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$NODE_DIR/cni"

  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$NODE_DIR/certs.d"
CONTAINERD
}

# containerd's hosts.toml: docker.io (the platform's images are docker.io/mlkube/...), the
# registry's name on the host (MLKUBE_REGISTRY) and its address all lead to the registry on
# ADDRESS, over plain HTTP; nothing falls back to a registry outside.
write_registry_hosts() {
  local address=$1 name
  for name in docker.io "$REGISTRY_HOST" "$REGISTRY_ADDRESS"; do
    mkdir -p "$NODE_DIR/certs.d/$name"
    cat >"$NODE_DIR/certs.d/$name/hosts.toml" <<HOSTS
server = "http://$address"

[host."http://$address"]
  capabilities = ["pull", "resolve"]
HOSTS
  done
}

ctr_node() { ctr --address "$CONTAINERD_SOCKET" --namespace k8s.io "$@"; }

containerd_ready() { ctr_node version; }

# Containers a crashed run left in the kept image store would come back as sandboxes the
# kubelet never made: remove them before the kubelet starts (and at `down`).
remove_containers() {
  local ids
  ids=$(ctr_node tasks ls -q 2>/dev/null || true)
  if [ -n "$ids" ]; then
    # shellcheck disable=SC2086
    for id in $ids; do ctr_node tasks kill --signal SIGKILL "$id" >/dev/null 2>&1 || true; done
    for id in $ids; do ctr_node tasks delete --force "$id" >/dev/null 2>&1 || true; done
  fi
  ids=$(ctr_node containers ls -q 2>/dev/null || true)
  # shellcheck disable=SC2086
  [ -z "$ids" ] || ctr_node containers delete $ids >/dev/null 2>&1 || true
}

# Image references the cluster no longer lists would keep their layers in the kept store for
# good (a rebuilt image's old version under the sha256 reference the kubelet's pull made, images
# a test pushed): remove every reference $STATE_DIR/images.list lacks, and containerd's
# collector frees what only they held. The listed images are pulled again only if missing.
prune_images() {
  local ref
  [ -s "$STATE_DIR/images.list" ] || return 0
  ctr_node images ls -q 2>/dev/null | while read -r ref; do
    awk -v ref="$ref" '$1 == ref { found = 1 } END { exit !found }' "$STATE_DIR/images.list" ||
      ctr_node images rm "$ref" >/dev/null 2>&1 || true
  done
}

# Pull every image of $STATE_DIR/images.list the node lacks (or holds another digest of) from
# the registry, as the node's containerd would for a pod (its hosts.toml), RUN... being the
# prefix that reaches the registry: in_node_netns at `up`, nothing for the preload.
pull_images() {
  local ref archive have
  while read -r ref archive; do
    [ -n "$ref" ] || continue
    have=$(ctr_node images ls "name==$ref" 2>/dev/null | awk 'NR > 1 {print $3}')
    [ "$have" != "$(archive_digest "$archive")" ] || continue
    "$@" ctr --address "$CONTAINERD_SOCKET" --namespace k8s.io images pull --hosts-dir "$NODE_DIR/certs.d" \
      "$ref" >>"$NODE_DIR/pulls.log" 2>&1 || die_with_log "$NODE_NAME could not pull $ref from the registry" "$NODE_DIR/pulls.log" 8
  done <"$STATE_DIR/images.list"
  discard_unpacked_layers
}

# A pulled image's layers, compressed, once unpacked into snapshots: containers run from the
# snapshots, and the registry keeps the layers, from which a pull that needs them (a policy of
# Always) fetches them again. Dropping them saves each node their size (what CRI's
# discard_unpacked_layers does for the kubelet's pulls; `ctr images pull` has no such switch).
# The image's manifest and config stay, and with them its digest and the kubelet's view of it.
discard_unpacked_layers() {
  local layers
  # The blobs a manifest names as its layers (labels containerd.io/gc.ref.content.l.<n>) that
  # the store still holds.
  layers=$(ctr_node content ls 2>/dev/null | awk '
    NR > 1 {
      held[$1] = 1
      n = split($0, parts, /containerd\.io\/gc\.ref\.content\.l\.[0-9]+=/)
      for (i = 2; i <= n; i++) named[substr(parts[i], 1, 71)] = 1
    }
    END { for (d in named) if (d in held) print d }')
  [ -n "$layers" ] || return 0
  # shellcheck disable=SC2086
  ctr_node content rm $layers >/dev/null 2>&1 || true
  # The files go at containerd's next collection; a lease removed with --sync runs one now.
  if ctr_node leases create --id mlkube-discard >/dev/null 2>&1; then
    ctr_node leases rm --sync mlkube-discard >/dev/null 2>&1 || true
  fi
}

# The image store a one-node cluster of an older mlkube kept for this port (images imported, not
# pulled): nothing reads it any more.
remove_old_store() {
  local old=$CACHE_ROOT/node/containerd-$API_PORT
  [ -d "$old" ] || return 0
  say "removing $old, the image store of this port's single node before the registry ($(du -sh "$old" | cut -f1))"
  rm -rf "$old"
}

# Pull the images on every node at once; say how long that took.
pull_on_every_node() {
  local k pids=() started=$SECONDS
  say "pulling the images on $REAL_NODES node(s) from the registry"
  for k in $(node_indexes); do
    (
      use_node "$k"
      pull_images in_node_netns
    ) &
    pids+=("$!")
  done
  for k in "${pids[@]}"; do wait "$k" || exit 1; done
  say "pulled in $((SECONDS - started))s"
}

# What a preload of this port left running when it was killed midway (its registry and
# containerds, started in sessions of their own): they would hold the kept stores, so that no
# node's containerd could open them.
stop_preload() {
  pkill -KILL -f "$CACHE_ROOT/node/preload-$API_PORT/" 2>/dev/null || true
}

# Push images (NAMEs, or all) into the cluster's kept registry storage and pull them into every
# node's kept image store ahead of `up`, through a registry and containerds of their own on the
# host, stopped after; their state and logs go to $CACHE_ROOT/node/preload-<API port>.
# cluster/run-tests.sh does this while the kwok tests run.
preload_images() {
  require_real_node_host
  [ ! -e "$NETNS_PATH" ] || die "a real node on port $API_PORT is up; its containerd holds the store" \
    "stop it first (cluster/local-cluster.sh down), or let its next up pull the images"
  # The helpers below read STATE_DIR: here it names the preload's own directory.
  local STATE_DIR=$CACHE_ROOT/node/preload-$API_PORT address pids=() k
  stop_preload
  trap stop_preload EXIT
  rm -rf "$STATE_DIR"
  mkdir -p "$STATE_DIR"
  remove_old_store
  address=127.0.0.1:$(free_port)
  write_registry_config "$STATE_DIR/registry.yaml" "$address"
  spawn registry "$REGISTRY_BIN" serve "$STATE_DIR/registry.yaml"
  wait_until "the preload's registry" 30 registry "registry_ready $address"
  build_images "$@"
  push_images "$address"
  for k in $(node_indexes); do
    use_node "$k"
    NODE_DIR=$STATE_DIR/node-$k CONTAINERD_SOCKET=$STATE_DIR/node-$k/containerd.sock
    write_containerd_config "$address"
    spawn "containerd-$k" containerd --config "$NODE_DIR/containerd.toml"
    wait_until "containerd" 60 "containerd-$k" containerd_ready
    pull_images &
    pids+=("$!")
  done
  for k in "${pids[@]}"; do wait "$k" || die "a preload's pull failed; see $STATE_DIR/node-*/pulls.log"; done
  local components=(registry)
  for k in $(node_indexes); do components+=("containerd-$k"); done
  stop_components "${components[@]}"
  say "preloaded the images into $REGISTRY_ROOT and the nodes' stores"
}
