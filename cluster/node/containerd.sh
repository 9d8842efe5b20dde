# shellcheck shell=bash
# containerd, its configuration and the CNI bridge of the pods, and the node's images imported
# into its kept image store (at `up`, or ahead with `preload`). Sourced by cluster/real-node.sh.

write_containerd_config() {
  local restrict_oom=false
  lacks_sys_resource && restrict_oom=true
  mkdir -p "$NODE_DIR/cni" "$CONTAINERD_ROOT"
  cat >"$NODE_DIR/containerd.toml" <<CONTAINERD
version = 2
root = "$CONTAINERD_ROOT"
state = "$STATE_DIR/containerd"

[grpc]
  address = "$CONTAINERD_SOCKET"

[ttrpc]
  address = "$STATE_DIR/containerd.sock.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "$STATE_DIR/containerd-opt"

[plugins."io.containerd.grpc.v1.cri"]
  # No registry is reachable: the sandbox image is built locally and imported.
  sandbox_image = "$PAUSE_IMAGE"
  # Without CAP_SYS_RESOURCE, lowering a sandbox's oom_score_adj fails every pod.
  restrict_oom_score_adj = $restrict_oom
  # Pods' network namespaces are mounted under the state dir, which \`down\` unmounts.
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "$STATE_DIR/runc"
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$NODE_DIR/cni"
CONTAINERD
  # One bridge for the pods; the namespace has no uplink, so no masquerade.
  cat >"$NODE_DIR/cni/10-mlkube.conflist" <<CNI
{
  "cniVersion": "1.0.0",
  "name": "$CNI_NETWORK",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$NODE_DIR/ipam",
        "ranges": [[{"subnet": "$POD_CIDR"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
CNI
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

# The digest of the manifest an OCI archive holds.
archive_digest() {
  { tar -xOf "$1" index.json 2>/dev/null || tar -xOf "$1" ./index.json 2>/dev/null || true; } |
    grep -o 'sha256:[0-9a-f]\{64\}' | head -n1 || true
}

# The node's images (the NAMEs image/node-images.sh takes, or all) built, and imported into the
# node's containerd unless it has them already.
import_images() {
  local list=$STATE_DIR/images.list ref archive digest have
  say "building the node's images (image/node-images.sh; cached after the first time)"
  "${MLKUBE_NODE_IMAGES:-$REPO_DIR/image/node-images.sh}" "$@" >"$list" 2>"$STATE_DIR/images.log" ||
    die_with_log "building the node's images failed" "$STATE_DIR/images.log" 10
  while read -r ref archive; do
    [ -n "$ref" ] || continue
    digest=$(archive_digest "$archive")
    have=$(ctr_node images ls "name==$ref" 2>/dev/null | awk 'NR > 1 {print $3}')
    if [ -n "$digest" ] && [ "$have" = "$digest" ]; then continue; fi
    say "importing $ref ($(($(stat -c %s "$archive") / 1024 / 1024)) MiB)"
    # The archive names the image by its tag alone; --base-name gives it the repository.
    ctr_node images import --base-name "${ref%:*}" "$archive" >>"$STATE_DIR/images.log" 2>&1 ||
      die "importing $archive into the node's containerd failed; see $STATE_DIR/images.log"
    ctr_node images ls "name==$ref" 2>/dev/null | grep -q "$ref" ||
      die "$ref is not in the node's containerd after importing $archive; see $STATE_DIR/images.log"
  done <"$list"
}

# Import images (NAMEs, or all) into the node's kept image store ahead of its `up`, through a
# containerd of their own on that store, stopped after; its state and logs go to
# $CACHE_ROOT/node/preload-<API port>. cluster/run-tests.sh does this while the kwok tests run.
preload_images() {
  require_real_node_host
  [ ! -e "$NETNS_PATH" ] || die "a real node on port $API_PORT is up; its containerd holds the store" \
    "stop it first (cluster/local-cluster.sh down), or let its next up import the images"
  # The helpers below read these: here they name the preload's own directory.
  local STATE_DIR=$CACHE_ROOT/node/preload-$API_PORT
  local NODE_DIR=$STATE_DIR/node CONTAINERD_SOCKET=$STATE_DIR/containerd.sock pid
  rm -rf "$STATE_DIR"
  mkdir -p "$STATE_DIR"
  write_containerd_config
  containerd --config "$NODE_DIR/containerd.toml" >"$STATE_DIR/containerd.log" 2>&1 &
  pid=$!
  echo "$pid" >"$STATE_DIR/containerd.pid"
  wait_until "containerd" 60 containerd containerd_ready
  import_images "$@"
  kill "$pid"
  wait "$pid" || true
  say "preloaded the node's images into $CONTAINERD_ROOT"
}
