# shellcheck shell=bash
# `down` of a real node, also after a crashed run, and what it may have left behind. Sourced by
# cluster/real-node.sh.

# Every process whose network namespace is this cluster's (containerd's shims included).
processes_in_netns() {
  local inode pid
  inode=$(stat -Lc %i "$NETNS_PATH" 2>/dev/null) || return 0
  for pid in /proc/[0-9]*; do
    [ "$(stat -Lc %i "$pid/ns/net" 2>/dev/null)" = "$inode" ] && echo "${pid#/proc/}"
  done
  return 0
}

# Every process in this cluster's pod cgroups (containers run in pod namespaces of their own).
processes_in_cgroups() {
  local root
  for root in $(cgroup_roots); do
    [ -d "$root" ] && find "$root" -name cgroup.procs -exec cat {} + 2>/dev/null
  done
  return 0
}

kill_all() {
  local pids
  pids=$( { processes_in_cgroups; processes_in_netns; } | sort -u | tr '\n' ' ')
  [ -n "${pids// /}" ] || return 0
  # shellcheck disable=SC2086
  kill -KILL $pids 2>/dev/null || true
}

unmount_under() {
  local dir=$1 mounts
  [ -n "$dir" ] || return 0
  # Deepest first; a mount still busy is detached lazily.
  mounts=$(awk -v dir="$dir/" 'index($5, dir) == 1 {print $5}' /proc/self/mountinfo | sort -r)
  for m in $mounts; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
}

remove_cgroups() {
  local root
  for root in $(cgroup_roots); do
    [ -d "$root" ] && find "$root" -depth -type d -exec rmdir {} + 2>/dev/null
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

down_real() {
  stop_operator
  # First what would recreate pods, then the node, then the rest of the control plane.
  stop_components kube-controller-manager kube-scheduler local-path-provisioner
  stop_components kubelet kube-proxy coredns
  if is_running containerd; then
    remove_containers
    stop_components containerd
  fi
  stop_components kube-apiserver etcd forwarder gateway-forwarder
  kill_all
  unmount_under "$STATE_DIR"
  remove_cgroups
  [ -e "$NETNS_PATH" ] && ip netns delete "$NETNS" 2>/dev/null
  remove_fixed_paths
}

# What `down` leaves behind, if anything (used by `status` and the tests of `down`).
leftovers_real() {
  local m p
  [ -e "$NETNS_PATH" ] && echo "network namespace $NETNS"
  p=$( { processes_in_cgroups; processes_in_netns; } | sort -u | tr '\n' ' ')
  [ -z "${p// /}" ] || echo "processes $p"
  m=$(awk -v dir="$STATE_DIR/" 'index($5, dir) == 1 {print $5}' /proc/self/mountinfo)
  [ -z "$m" ] || echo "mounts $(echo "$m" | tr '\n' ' ')"
  for c in $(cgroup_roots); do [ -d "$c" ] && echo "cgroup $c"; done
  return 0
}
