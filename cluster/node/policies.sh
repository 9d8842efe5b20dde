# shellcheck shell=bash
# NetworkPolicies enforced: kube-router's network policy controller, built from its Go module,
# on every node beside flannel, with its router and service proxy off (k3s runs the same
# controller beside flannel). It watches pods, namespaces and NetworkPolicies and writes iptables
# rules and ipsets in the node's namespace, so a pod that a policy selects gets only the traffic
# the policy admits, whether it comes over the node's CNI bridge or routed from another node.
# Traffic from the node itself (the kubelet's probes) stays admitted. Sourced by
# cluster/real-node.sh.
#
# Why not sigs.k8s.io/kube-network-policies (what kind runs): it sends each new connection to
# userspace with nftables' `queue` statement, and this kernel is built without it
# (CONFIG_NFT_QUEUE is not set: `nft add rule ... queue` fails with "No such file or directory").

# kube-router reads what its informers list, every one of them started even with the router
# and proxy off.
allow_kube_router() {
  allow_agent kube-router '- {apiGroups: [""], resources: [namespaces, pods, services, nodes, endpoints], verbs: [get, list, watch]}
- {apiGroups: [networking.k8s.io], resources: [networkpolicies], verbs: [get, list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [get, list, watch]}'
}

# The policy controller on the node use_node chose, once its Node is registered (kube-router
# reads the node's address from it, and exits when there is none).
start_kube_router() {
  start_in_node_netns "kube-router-$NODE_INDEX" "$KUBE_ROUTER_BIN" \
    --kubeconfig "$STATE_DIR/kube-router.kubeconfig" --hostname-override "$NODE_NAME" \
    --run-firewall=true --run-router=false --run-service-proxy=false --run-loadbalancer=false \
    --enable-cni=false --enable-ipv6=false --enable-pod-egress=false \
    --health-port=0 --metrics-port=0 --iptables-sync-period=1m
}
