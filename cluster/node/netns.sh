# shellcheck shell=bash
# The cluster's network namespace and one per further node, the links between them, the loopback
# forwarders that are the host's only ways in, and the processes started inside them. Sourced by
# cluster/real-node.sh.

in_netns() { nsenter --net="$NETNS_PATH" "$@"; }

# In the namespaces of the node use_node chose: its network's and its mounts'.
in_node_netns() { nsenter --net="$NODE_NETNS_PATH" --mount="$NODE_MNT_PATH" "$@"; }

# What every namespace of the cluster needs: its loopback, forwarding, and a route to the
# Service range on lo (without a default route, a process of the namespace, not a pod, finds no
# route to a ClusterIP before kube-proxy's DNAT), and Service traffic between two pods on one
# bridge passing through iptables.
prepare_namespace() {
  local name=$1
  ip -n "$name" link set lo up
  ip -n "$name" route add "$SERVICE_CIDR" dev lo
  nsenter --net="/run/netns/$name" sysctl -qw net.ipv4.ip_forward=1
  nsenter --net="/run/netns/$name" sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
}

# The cluster's namespace, with the nodes' bridge and node 1's (the control plane's) address.
create_netns() {
  ip netns add "$NETNS" || die "could not create the network namespace $NETNS"
  prepare_namespace "$NETNS"
  ip -n "$NETNS" link add "$NODES_BRIDGE" type bridge
  ip -n "$NETNS" addr add "$NODE_IP/24" dev "$NODES_BRIDGE"
  ip -n "$NETNS" link set "$NODES_BRIDGE" up
}

# The namespace of node K (2, 3, ...): eth0 there, its peer veth-nK on the cluster's bridge.
create_node_netns() {
  local k=$1 port=veth-n$1
  use_node "$k"
  ip netns add "$NODE_NETNS" || die "could not create the network namespace $NODE_NETNS"
  prepare_namespace "$NODE_NETNS"
  ip -n "$NETNS" link add "$port" type veth peer name eth0 netns "$NODE_NETNS"
  ip -n "$NETNS" link set "$port" master "$NODES_BRIDGE" up
  ip -n "$NODE_NETNS" addr add "$NODE_ADDRESS/24" dev eth0
  ip -n "$NODE_NETNS" link set eth0 up
}

create_namespaces() {
  local k
  create_netns
  for k in $(node_indexes); do [ "$k" = 1 ] || create_node_netns "$k"; done
}

# The host's only ways in: 127.0.0.1:<API port> on the host to the same port in the namespace,
# 127.0.0.1:<gateway port> to the gateway's node port (closed at once until one is applied), and
# the registry's name on the host to the registry.
start_forwarder() {
  forward forwarder "$API_PORT" 127.0.0.1 "$API_PORT"
  echo "$GATEWAY_PORT" >"$STATE_DIR/gateway-port"
  forward gateway-forwarder "$GATEWAY_PORT" "$NODE_IP" "$GATEWAY_NODE_PORT"
  forward registry-forwarder "${REGISTRY_HOST##*:}" "${REGISTRY_ADDRESS%:*}" "${REGISTRY_ADDRESS##*:}"
}

# Start NAME: 127.0.0.1:PORT on the host to HOST:TARGET_PORT in the namespace.
forward() {
  local name=$1 port=$2 host=$3 target_port=$4
  spawn "$name" socat "TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork" \
    "EXEC:nsenter --net=$NETNS_PATH socat STDIO TCP\\:$host\\:$target_port"
}

# Start NAME in the cluster's namespace: COMMAND... (a binary by its path, and its arguments).
start_in_netns() {
  local name=$1
  shift
  spawn "$name" nsenter --net="$NETNS_PATH" "$@"
}

# Start NAME in the namespaces of the node use_node chose.
start_in_node_netns() {
  local name=$1
  shift
  spawn "$name" nsenter --net="$NODE_NETNS_PATH" --mount="$NODE_MNT_PATH" "$@"
}
