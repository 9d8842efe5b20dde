# shellcheck shell=bash
# The pod network: flanneld, built from its Go module, on every node, and each node's CNI bridge
# on the subnet flannel leased it. Sourced by cluster/real-node.sh.
#
# flannel's kube subnet manager reads each Node's pod CIDR (the controller-manager allocates them
# from $CLUSTER_CIDR), writes it to the node's subnet file, and its host-gw backend routes every
# other node's pod CIDR via that node's address over the nodes' bridge. The CNI configuration is
# what flannel's own CNI plugin would hand to the bridge plugin (Debian's): that plugin's module
# is not served here, so the node writes the same configuration itself from the subnet file.

# A ClusterRole mlkube:NAME with RULES (YAML list items) bound to the user mlkube:NAME, the
# identity of one of the nodes' agents (its certificate from generate_cluster_node_pki).
allow_agent() {
  local name=$1 rules=$2
  kubectl_local apply -f - >"$STATE_DIR/$name-rbac.log" 2>&1 <<RBAC || die "creating $name's ClusterRole failed; see $STATE_DIR/$name-rbac.log"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "mlkube:$name"}
rules:
$rules
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "mlkube:$name"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "mlkube:$name"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "mlkube:$name"}
RBAC
}

# flannel may do what upstream's ClusterRole lets it: read every Node (the Node authorizer lets
# a node read only its own), annotate them and set their NetworkUnavailable condition.
allow_flannel() {
  allow_agent flannel '- {apiGroups: [""], resources: [nodes], verbs: [get, list, watch, patch]}
- {apiGroups: [""], resources: [nodes/status], verbs: [patch]}'
}

# flanneld on the node use_node chose: its Node's lease, on the node's link.
start_flannel() {
  local iface=eth0
  [ "$NODE_INDEX" != 1 ] || iface=$NODES_BRIDGE
  printf '{"Network": "%s", "EnableNFTables": false, "Backend": {"Type": "host-gw"}}\n' "$CLUSTER_CIDR" \
    >"$NODE_DIR/net-conf.json"
  start_in_node_netns "flannel-$NODE_INDEX" env NODE_NAME="$NODE_NAME" "$FLANNEL_BIN" --kube-subnet-mgr \
    --kubeconfig-file "$STATE_DIR/flannel.kubeconfig" --iface "$iface" --ip-masq=false \
    --net-config-path "$NODE_DIR/net-conf.json" --subnet-file "$NODE_DIR/subnet.env" --healthz-port 0
}

# The node's CNI bridge on its flannel subnet (FLANNEL_SUBNET=10.244.K.1/24 in the subnet file):
# the gateway is the bridge, the namespace has no uplink, so no masquerade.
write_cni_config() {
  local subnet
  subnet=$(sed -n 's/^FLANNEL_SUBNET=//p' "$NODE_DIR/subnet.env")
  subnet=${subnet%.*/*}.0/${subnet#*/}
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
        "ranges": [[{"subnet": "$subnet"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
CNI
}

# Once flannel leased the node its subnet, its pods get a network.
wait_for_pod_network() {
  wait_until "flannel's subnet for $NODE_NAME" 90 "flannel-$NODE_INDEX" "[ -s $NODE_DIR/subnet.env ]"
  write_cni_config
}
