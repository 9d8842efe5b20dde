# shellcheck shell=bash
# The real node of the local cluster (MLKUBE_CLUSTER_NODE=real), sourced by local-cluster.sh.
#
# Beside the same control plane, one node that really runs containers: containerd, runc and the
# CNI plugins from Debian, a kubelet and kube-proxy built with the control plane, and CoreDNS
# built from its module. Everything with a non-loopback address (the API server, etcd, the
# node agents, the CNI bridge, every pod) lives in one network namespace per cluster,
# `mlkube-<API port>`, with no default route, no link to the host's network and no NAT: nothing
# in it can reach anything outside it. The host reaches the API server through a forwarder on
# 127.0.0.1:<API port>, so KUBECONFIG, kubectl and the tests work as with kwok, and the gateway
# component (its Service of type NodePort on node port 30080) through another on
# 127.0.0.1:<API port + 1> (MLKUBE_GATEWAY_PORT), which `env` prints as MLKUBE_GATEWAY_URL.
#
# Volumes: Rancher's local-path-provisioner, built from its module like CoreDNS and run beside
# the node agents, provisions every claim of the default StorageClass `local-path` as a
# directory under the node's state dir (so `down` removes them), made and removed by helper pods
# run from the busybox image.
#
# Images come from image/node-images.sh (or the command MLKUBE_NODE_IMAGES names, which prints
# `<ref> <OCI archive>` lines as that script does), built locally, never pulled, and are imported
# into the node's containerd, whose image store is kept in the cache (per API port) so that a
# later `up` imports only what changed.
#
# Every process is started with `nsenter --net=...`, never `ip netns exec`: the latter also
# unshares the mount namespace and remounts /sys, so the kubelet and runc would see no cgroups
# and runc no tmpfs volumes.
#
# This file holds the settings the node's parts share; the parts, one concern each, are under
# cluster/node/: host.sh (what the machine needs), netns.sh (the namespace, the forwarders into
# it, processes started in it), containerd.sh (containerd and the node's images), kubelet.sh
# (the kubelet, kube-proxy, CoreDNS and their certificates; `start_node`), storage.sh
# (local-path-provisioner and the StorageClass) and teardown.sh (`down` and its leftovers).

COREDNS_VERSION=v1.14.7
COREDNS_BIN=$CACHE_ROOT/coredns-$COREDNS_VERSION/bin/coredns
LOCAL_PATH_VERSION=v0.0.30
LOCAL_PATH_BIN=$CACHE_ROOT/local-path-provisioner-$LOCAL_PATH_VERSION/bin/local-path-provisioner
LOCAL_PATH_NAMESPACE=local-path-storage
STORAGE_CLASS=local-path
NETNS=mlkube-$API_PORT
NETNS_PATH=/run/netns/$NETNS
NODE_NAME=mlkube-node
# The node's address, on the namespace's loopback (/32): this kernel may have no dummy driver.
NODE_IP=10.96.0.1
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.0.0.0/24
CNI_NETWORK=mlkube-$API_PORT
# Pods of this cluster live under a cgroup root of its own, so `down` removes exactly them.
CGROUP_ROOT=mlkube-$API_PORT
NODE_DIR=$STATE_DIR/node
CONTAINERD_SOCKET=$STATE_DIR/containerd.sock
# Images survive `down`: imported once, kept per cluster port (two clusters never share a store).
CONTAINERD_ROOT=$CACHE_ROOT/node/containerd-$API_PORT
# shellcheck disable=SC2034 # local-cluster.sh's COMPONENTS, with a real node
REAL_COMPONENTS=(forwarder gateway-forwarder etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet
  kube-proxy coredns local-path-provisioner)
# The gateway's host port, kept with the cluster (as its kind of node) so that `env` prints the
# one `up` forwarded; and the node port the gateway component's local environment sets.
GATEWAY_PORT=$(cat "$STATE_DIR/gateway-port" 2>/dev/null || echo "${MLKUBE_GATEWAY_PORT:-$((API_PORT + 1))}")
GATEWAY_NODE_PORT=30080
# The node's tools, and the images' (image/node-images.sh): command or path, then its package.
REAL_TOOLS=(nsenter:util-linux ip:iproute2 socat:socat containerd:containerd runc:runc
  ctr:containerd iptables:iptables conntrack:conntrack /usr/lib/cni/bridge:containernetworking-plugins
  mmdebstrap:mmdebstrap zstd:zstd musl-gcc:musl-tools npm:npm)

# shellcheck source=SCRIPTDIR/node/host.sh
. "$REPO_DIR/cluster/node/host.sh"
# shellcheck source=SCRIPTDIR/node/netns.sh
. "$REPO_DIR/cluster/node/netns.sh"
# shellcheck source=SCRIPTDIR/node/containerd.sh
. "$REPO_DIR/cluster/node/containerd.sh"
# shellcheck source=SCRIPTDIR/node/kubelet.sh
. "$REPO_DIR/cluster/node/kubelet.sh"
# shellcheck source=SCRIPTDIR/node/storage.sh
. "$REPO_DIR/cluster/node/storage.sh"
# shellcheck source=SCRIPTDIR/node/teardown.sh
. "$REPO_DIR/cluster/node/teardown.sh"
