# shellcheck shell=bash
# `down` of the real nodes, also after a crashed run, and what it may have left behind. Sourced
# by cluster/real-node.sh.

# The cluster's network namespaces: its own and its nodes' (however many a crashed run made).
cluster_namespaces() {
  local path
  for path in "$NETNS_PATH" "$NETNS_PATH"-[0-9]*; do [ -e "$path" ] && echo "${path##*/}"; done
  return 0
}

# Every process whose network namespace is one of this cluster's (containerd's shims included).
processes_in_netns() {
  local inodes=() netns pid inode
  for netns in $(cluster_namespaces); do inodes+=("$(stat -Lc %i "/run/netns/$netns" 2>/dev/null)"); done
  [ ${#inodes[@]} -gt 0 ] || return 0
  for pid in /proc/[0-9]*; do
    inode=$(stat -Lc %i "$pid/ns/net" 2>/dev/null) || continue
    [[ " ${inodes[*]} " == *" $inode "* ]] && echo "${pid#/proc/}"
  done
  return 0
}

# Every process in this cluster's pod cgroups (SUFFIX empty), or in those of node SUFFIX (node-K)
# (containers run in pod namespaces of their own).
processes_in_cgroups() {
  local root
  for root in $(cgroup_roots); do
    root=$root${1:+/$1}
    [ -d "$root" ] && find "$root" -name cgroup.procs -exec cat {} + 2>/dev/null
  done
  return 0
}

# Paths the kubelet, runc and the CNI plugins use whatever they are told.
remove_fixed_paths() {
  rm -f /var/lib/cni/results/"$CNI_NETWORK"-* 2>/dev/null || true
  pgrep -x kubelet >/dev/null || rm -rf /var/lib/kubelet/device-plugins
  rmdir /var/lib/kubelet 2>/dev/null || true
  pgrep -f containerd-shim >/dev/null || rm -rf /run/containerd/s
}

# Each node's containers removed, then its containerd stopped.
stop_containerds() {
  local k
  for k in $(node_indexes); do
    use_node "$k"
    if is_running "containerd-$k"; then
      remove_containers
      stop_components "containerd-$k"
    fi
  done
}

down_real() {
  local k agents=() netns
  stop_operator
  # First what would recreate pods, then the nodes, then the rest of the control plane.
  stop_components kube-controller-manager kube-scheduler local-path-provisioner
  for k in $(node_indexes); do agents+=("kubelet-$k" "kube-proxy-$k" "flannel-$k" "kube-router-$k"); done
  stop_components "${agents[@]}" coredns
  stop_containerds
  stop_components kube-apiserver etcd registry forwarder gateway-forwarder registry-forwarder
  kill_all
  unmount_under "$STATE_DIR"
  remove_cgroups
  for netns in $(cluster_namespaces); do ip netns delete "$netns" 2>/dev/null; done
  remove_fixed_paths
}

# What `down` keeps on purpose, so that the next `up` of this port pushes and pulls nothing: the
# registry's storage and the nodes' image stores, their size, and how to free them.
say_kept_stores() {
  local kept=() size path
  for path in "$REGISTRY_ROOT" "$CACHE_ROOT/node/containerd-$API_PORT-"*; do
    [ -d "$path" ] && kept+=("$path")
  done
  [ ${#kept[@]} -gt 0 ] || return 0
  size=$(du -sch "${kept[@]}" 2>/dev/null | tail -n 1 | cut -f1)
  say "kept for the next up on port $API_PORT: the registry's storage and the nodes' image stores, $size; free them with: rm -rf ${kept[*]}"
}

# What `down` leaves behind, if anything (used by `status` and the tests of `down`).
leftovers_real() {
  local m p netns
  for netns in $(cluster_namespaces); do echo "network namespace $netns"; done
  p=$( { processes_in_cgroups ""; processes_in_netns; } | sort -u | tr '\n' ' ')
  [ -z "${p// /}" ] || echo "processes $p"
  m=$(awk -v dir="$STATE_DIR/" 'index($5, dir) == 1 {print $5}' /proc/self/mountinfo)
  [ -z "$m" ] || echo "mounts $(echo "$m" | tr '\n' ' ')"
  for c in $(cgroup_roots); do [ -d "$c" ] && echo "cgroup $c"; done
  # The nodes' own directories (their /var/lib/mlkube: the VolumeManagers' data) live in it.
  [ ! -e "$STATE_DIR" ] || echo "files $STATE_DIR"
  return 0
}
