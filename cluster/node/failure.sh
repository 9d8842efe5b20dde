# shellcheck shell=bash
# A node that fails and comes back, as machines do: `stop-node K` and `start-node K`, for the
# tests of node loss and for anyone who wants to watch one. Sourced by cluster/real-node.sh.

# K is a node's index, at least LOW.
is_node_index() { [[ $1 =~ ^[0-9]+$ ]] && [ "$1" -ge "$2" ] && [ "$1" -le "$REAL_NODES" ]; }

# Every process of the node use_node chose: its agents, containerd and shims (its namespace) and
# its containers (its cgroups).
processes_of_node() {
  local inode pid
  processes_in_cgroups "node-$NODE_INDEX"
  inode=$(stat -Lc %i "$NODE_NETNS_PATH" 2>/dev/null) || return 0
  for pid in /proc/[0-9]*; do
    [ "$(stat -Lc %i "$pid/ns/net" 2>/dev/null)" = "$inode" ] && echo "${pid#/proc/}"
  done
  return 0
}

# Node K fails as a machine does: every process of it killed at once, its kubelet, containerd
# and containers alike, with no goodbye to the API server; its namespace, link and disk stay.
# Node 1 holds the control plane: it cannot fail alone.
stop_node() {
  local k=$1 pids
  [ "$NODE_KIND" = real ] || die "only real nodes can be stopped; this cluster's are kwok's"
  is_node_index "$k" 2 || die "no node '$k' to stop" "stop one of 2 to $REAL_NODES (node 1 holds the control plane)"
  use_node "$k"
  pids=$(processes_of_node | sort -u | tr '\n' ' ')
  # shellcheck disable=SC2086
  [ -z "${pids// /}" ] || kill -KILL $pids 2>/dev/null || true
  # shellcheck disable=SC2086
  wait_gone $pids
  say "stopped $NODE_NAME (killed ${pids:-nothing})"
}

# Until each of the processes PID... has ended (a SIGKILL takes effect a moment after it is sent).
wait_gone() {
  local pid deadline=$((SECONDS + 30))
  for pid in "$@"; do
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
  done
}

# Node K back, as a machine that rebooted: a fresh mount namespace (what its kubelet mounted is
# gone, its disk is not), containerd, then the kubelet, kube-proxy and flannel, and once it is
# Ready, kube-router's policy controller.
start_node() {
  local k=$1
  [ "$NODE_KIND" = real ] || die "only real nodes can be started; this cluster's are kwok's"
  is_node_index "$k" 1 || die "no node '$k' to start" "start one of 1 to $REAL_NODES"
  use_node "$k"
  ! is_running "kubelet-$k" || die "$NODE_NAME runs already"
  start_containerd
  start_node_agents
  wait_until "the node $NODE_NAME to be Ready" 120 "kubelet-$k" node_ready
  start_kube_router
  say "started $NODE_NAME"
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
