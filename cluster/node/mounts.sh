# shellcheck shell=bash
# Each node's own mount namespace, as each machine has its own disk: the local nodes share the
# host's filesystem, so what a node keeps at a fixed path (the volume controller's hostPath
# data under /var/lib/mlkube) would otherwise be one directory for every node and cluster.
# Sourced by cluster/real-node.sh.

# The fixed paths each node sees as a directory of its own, $NODE_DIR/own/<path>.
NODE_OWN_PATHS=(/var/lib/mlkube)

# The folder of the namespaces' files: a mount of itself, private, as a persistent mount
# namespace's file must be on.
mounts_dir() {
  local dir=$STATE_DIR/mnt
  mkdir -p "$dir"
  mountpoint -q "$dir" || mount --bind "$dir" "$dir"
  mount --make-private "$dir"
}

# A fresh mount namespace for the node use_node chose (as after a boot: what its agents mounted
# before is gone with the old one), the host's mounts still reaching it, its own paths bound in.
create_node_mounts() {
  local path
  mounts_dir
  if mountpoint -q "$NODE_MNT_PATH"; then umount "$NODE_MNT_PATH"; fi
  touch "$NODE_MNT_PATH"
  unshare --mount="$NODE_MNT_PATH" --propagation slave true ||
    die "could not create the mount namespace of $NODE_NAME"
  for path in "${NODE_OWN_PATHS[@]}"; do
    mkdir -p "$path" "$NODE_DIR/own$path"
    nsenter --mount="$NODE_MNT_PATH" mount --bind "$NODE_DIR/own$path" "$path" ||
      die "could not give $NODE_NAME its own $path"
  done
}
