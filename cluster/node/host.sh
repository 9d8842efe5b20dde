# shellcheck shell=bash
# What a real node needs of the machine: root and its tools (installed with apt-get when
# missing), and the kernel's cgroups and capabilities, which the node's configuration follows.
# Sourced by cluster/real-node.sh.

require_real_node_host() {
  [ "$(id -u)" -eq 0 ] ||
    die "a real node needs root: it creates a network namespace, cgroups and mounts, and runs containerd and a kubelet" \
      "run it as root (e.g. sudo -E $0 up), or use the simulated nodes: unset MLKUBE_CLUSTER_NODE (kwok is the default)"
  local entry tool package missing=()
  for entry in "${REAL_TOOLS[@]}"; do
    tool=${entry%%:*}
    package=${entry#*:}
    command -v "$tool" >/dev/null 2>&1 || [ -x "$tool" ] || missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  command -v apt-get >/dev/null ||
    die "the real node needs ${missing[*]}, and there is no apt-get to install them" "install them with your package manager"
  say "installing ${missing[*]} (apt-get)"
  mkdir -p "$CACHE_ROOT"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } >"$CACHE_ROOT/apt.log" 2>&1 ||
    die "apt-get install ${missing[*]} failed; see $CACHE_ROOT/apt.log"
}

cgroup_v2() { [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; }

# CAP_SYS_RESOURCE (capability 24) missing from the bounding set: nothing may lower its
# oom_score_adj, which the CRI does for every sandbox (-998) unless told not to.
lacks_sys_resource() {
  local bounding
  bounding=$(awk '/^CapBnd:/ {print $2}' /proc/self/status)
  (((0x$bounding >> 24) & 1)) && return 1
  return 0
}

# The cgroup directories of this cluster's pods: one per v1 hierarchy, or the one v2 tree.
cgroup_roots() {
  if cgroup_v2; then
    echo "/sys/fs/cgroup/$CGROUP_ROOT"
    return
  fi
  local hierarchy
  for hierarchy in /sys/fs/cgroup/*/; do
    [ -f "$hierarchy/cgroup.procs" ] && echo "${hierarchy%/}/$CGROUP_ROOT"
  done
}
