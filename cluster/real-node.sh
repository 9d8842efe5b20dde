# shellcheck shell=bash
# The real nodes of the local cluster (MLKUBE_CLUSTER_NODE=real), sourced by local-cluster.sh.
#
# Beside the same control plane, MLKUBE_CLUSTER_NODES nodes (default 2: the fewest that show
# what crosses a node boundary, and as many kubelets as these 2-core machines carry beside the
# tests) that really run containers: each a kubelet, containerd (Debian's, with runc and the CNI
# plugins), kube-proxy and flanneld in a network namespace of its own, with its own pod CIDR.
#
# Network: the cluster's namespace, `mlkube-<API port>`, holds the control plane (the API server,
# etcd, the controller-manager, the scheduler), CoreDNS, the registry, local-path-provisioner and
# node 1; node K (2, 3, ...) lives in `mlkube-<API port>-K`, linked to the cluster's namespace by
# a veth pair on its bridge `mlkube0` (10.96.0.0/24: node K is 10.96.0.K). flannel, built from its
# Go module, gives each node's pods a route to every other node's (its host-gw backend: routes
# via the other nodes' addresses over the bridge); each node's pods sit on a CNI bridge with
# the subnet flannel leased to it. No namespace has a default route, a link to the host's
# network or NAT: nothing in them can reach anything outside. The host reaches the API server
# through a forwarder on 127.0.0.1:<API port>, so KUBECONFIG, kubectl and the tests work as with
# kwok; the gateway component (its Service of type NodePort on node port 30080) through another
# on 127.0.0.1:<API port + 1> (MLKUBE_GATEWAY_URL); and the registry through a third on
# 127.0.0.1:<API port + 2> (MLKUBE_REGISTRY).
#
# Images: CNCF Distribution's registry, built from its Go module, serves them inside the
# cluster's namespace on 10.96.0.1:5000; skopeo pushes every image that image/node-images.sh
# (or the command MLKUBE_NODE_IMAGES names, printing `<ref> <OCI archive>` lines as that script
# does) built, and every node's containerd pulls from it: `docker.io` (the platform's images are
# docker.io/mlkube/...) and MLKUBE_REGISTRY's name both lead there (containerd's hosts.toml), so
# imagePullPolicy, a wrong tag and pull secrets behave as on any cluster. `up` pulls every image
# on every node ahead, as a node image cache would. The registry's storage and each node's image
# store are kept in the cache per API port, so a later `up` pushes and pulls only what changed.
#
# Volumes: Rancher's local-path-provisioner, built from its module, provisions every claim of
# the default StorageClass `local-path` as a directory under its node's state dir (so `down`
# removes them), made and removed by helper pods run from the busybox image.
#
# Every process is started with `nsenter --net=...`, never `ip netns exec`: the latter also
# unshares the mount namespace and remounts /sys, so the kubelet and runc would see no cgroups
# and runc no tmpfs volumes.
#
# This file holds the settings the nodes' parts share; the parts, one concern each, are under
# cluster/node/: parts.sh (the Go programs only the nodes run, built once), host.sh (what the
# machine needs), netns.sh (the namespaces, their links, the
# forwarders into them, processes started in them), registry.sh (the registry and the pushes),
# containerd.sh (containerd and the pulls), network.sh (flannel and each node's CNI bridge),
# kubelet.sh (the kubelet, kube-proxy, CoreDNS and their certificates; `start_nodes`),
# storage.sh (local-path-provisioner and the StorageClass), teardown.sh (`down` and its
# leftovers) and failure.sh (a node that fails and comes back).

LOCAL_PATH_NAMESPACE=local-path-storage
STORAGE_CLASS=local-path
# The number of real nodes: the running cluster's, else MLKUBE_CLUSTER_NODES (1 to 8), else 2.
REAL_NODES=$(cat "$STATE_DIR/nodes" 2>/dev/null || echo "${MLKUBE_CLUSTER_NODES:-2}")
NETNS=mlkube-$API_PORT
NETNS_PATH=/run/netns/$NETNS
# The nodes' link: a bridge in the cluster's namespace; node 1 (and the control plane) is
# 10.96.0.1 on it, node K 10.96.0.K.
NODES_BRIDGE=mlkube0
NODE_NETWORK_PREFIX=10.96.0
NODE_IP=$NODE_NETWORK_PREFIX.1
# Every node's pod CIDR is a /24 of it, allocated by the controller-manager.
CLUSTER_CIDR=10.244.0.0/16
SERVICE_CIDR=10.0.0.0/24
CNI_NETWORK=mlkube-$API_PORT
# Pods of this cluster live under a cgroup root of its own (one child per node), so `down`
# removes exactly them.
CGROUP_ROOT=mlkube-$API_PORT
# The registry, inside the cluster's namespace, and its name on the host (a forwarder).
REGISTRY_ADDRESS=$NODE_IP:5000
REGISTRY_HOST=127.0.0.1:$((API_PORT + 2))
# The registry's storage survives `down`: pushed once, kept per cluster port.
REGISTRY_ROOT=$CACHE_ROOT/registry/$API_PORT
# The gateway's host port, kept with the cluster (as its kind of node) so that `env` prints the
# one `up` forwarded; and the node port the gateway component's local environment sets.
GATEWAY_PORT=$(cat "$STATE_DIR/gateway-port" 2>/dev/null || echo "${MLKUBE_GATEWAY_PORT:-$((API_PORT + 1))}")
GATEWAY_NODE_PORT=30080
# The node's tools, and the images' (image/node-images.sh): command or path, then its package.
REAL_TOOLS=(nsenter:util-linux ip:iproute2 socat:socat containerd:containerd runc:runc
  ctr:containerd iptables:iptables ipset:ipset conntrack:conntrack /usr/lib/cni/bridge:containernetworking-plugins
  skopeo:skopeo mmdebstrap:mmdebstrap zstd:zstd musl-gcc:musl-tools npm:npm)

# The node the functions of cluster/node/ act on: use_node K (1 to REAL_NODES) sets its name,
# address, namespace, directory, containerd and cgroup.
use_node() {
  NODE_INDEX=$1
  NODE_NAME=mlkube-node-$1
  NODE_ADDRESS=$NODE_NETWORK_PREFIX.$1
  if [ "$1" = 1 ]; then NODE_NETNS=$NETNS; else NODE_NETNS=$NETNS-$1; fi
  NODE_NETNS_PATH=/run/netns/$NODE_NETNS
  NODE_MNT_PATH=$STATE_DIR/mnt/node-$1
  NODE_DIR=$STATE_DIR/node-$1
  CONTAINERD_SOCKET=$NODE_DIR/containerd.sock
  # Images survive `down`: pulled once, kept per cluster port and node.
  CONTAINERD_ROOT=$CACHE_ROOT/node/containerd-$API_PORT-$1
  NODE_CGROUP=$CGROUP_ROOT/node-$1
}
use_node 1

check_node_count() {
  case "$REAL_NODES" in
    [1-8]) ;;
    *) die "MLKUBE_CLUSTER_NODES=$REAL_NODES is not a number of real nodes" "use 1 to 8 (default 2)" ;;
  esac
}

# What only real nodes run, built once: CoreDNS, flannel, kube-router, local-path-provisioner
# and the registry.
build_node() {
  build_node_parts
  build_registry
}

# The node indexes, 1 to REAL_NODES.
node_indexes() { seq 1 "$REAL_NODES"; }

# The processes of the cluster with real nodes: the control plane's, the cluster-wide parts in
# its namespace, and each node's.
real_components() {
  local k
  echo forwarder gateway-forwarder registry-forwarder etcd kube-apiserver kube-controller-manager kube-scheduler \
    registry coredns local-path-provisioner
  for k in $(node_indexes); do echo "containerd-$k kubelet-$k kube-proxy-$k flannel-$k kube-router-$k"; done
}

# shellcheck source=SCRIPTDIR/node/parts.sh
. "$REPO_DIR/cluster/node/parts.sh"
# shellcheck source=SCRIPTDIR/node/host.sh
. "$REPO_DIR/cluster/node/host.sh"
# shellcheck source=SCRIPTDIR/node/netns.sh
. "$REPO_DIR/cluster/node/netns.sh"
# shellcheck source=SCRIPTDIR/node/mounts.sh
. "$REPO_DIR/cluster/node/mounts.sh"
# shellcheck source=SCRIPTDIR/node/registry.sh
. "$REPO_DIR/cluster/node/registry.sh"
# shellcheck source=SCRIPTDIR/node/containerd.sh
. "$REPO_DIR/cluster/node/containerd.sh"
# shellcheck source=SCRIPTDIR/node/network.sh
. "$REPO_DIR/cluster/node/network.sh"
# shellcheck source=SCRIPTDIR/node/policies.sh
. "$REPO_DIR/cluster/node/policies.sh"
# shellcheck source=SCRIPTDIR/node/kubelet.sh
. "$REPO_DIR/cluster/node/kubelet.sh"
# shellcheck source=SCRIPTDIR/node/storage.sh
. "$REPO_DIR/cluster/node/storage.sh"
# shellcheck source=SCRIPTDIR/node/teardown.sh
. "$REPO_DIR/cluster/node/teardown.sh"
# shellcheck source=SCRIPTDIR/node/failure.sh
. "$REPO_DIR/cluster/node/failure.sh"
