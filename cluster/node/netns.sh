# shellcheck shell=bash
# The cluster's network namespace, the loopback forwarders that are the host's only ways into
# it, and the processes started inside it. Sourced by cluster/real-node.sh.

in_netns() { nsenter --net="$NETNS_PATH" "$@"; }

create_netns() {
  ip netns add "$NETNS" || die "could not create the network namespace $NETNS"
  in_netns ip link set lo up
  in_netns ip addr add "$NODE_IP/32" dev lo
  # Without a default route, a process of the namespace (not a pod) finds no route to a
  # ClusterIP before kube-proxy's DNAT: route the Service range to lo.
  in_netns ip route add "$SERVICE_CIDR" dev lo
  in_netns sysctl -qw net.ipv4.ip_forward=1
  # Service traffic between two pods on the bridge must pass through iptables.
  in_netns sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
}

# The host's only ways in: 127.0.0.1:<API port> on the host to the same port in the namespace,
# and 127.0.0.1:<gateway port> to the gateway's node port (closed at once until one is applied).
start_forwarder() {
  forward forwarder "$API_PORT" 127.0.0.1 "$API_PORT"
  echo "$GATEWAY_PORT" >"$STATE_DIR/gateway-port"
  forward gateway-forwarder "$GATEWAY_PORT" "$NODE_IP" "$GATEWAY_NODE_PORT"
}

# Start NAME: 127.0.0.1:PORT on the host to HOST:TARGET_PORT in the namespace.
forward() {
  local name=$1 port=$2 host=$3 target_port=$4
  spawn "$name" socat "TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork" \
    "EXEC:nsenter --net=$NETNS_PATH socat STDIO TCP\\:$host\\:$target_port"
}

# Start NAME in the namespace: COMMAND... (a binary by its path, and its arguments).
start_in_netns() {
  local name=$1
  shift
  spawn "$name" nsenter --net="$NETNS_PATH" "$@"
}
