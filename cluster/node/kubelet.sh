# shellcheck shell=bash
# The nodes' agents: on each the kubelet and kube-proxy, with the certificates they need; CoreDNS
# in the cluster's namespace; and `start_nodes`, which brings every node up. Sourced by
# cluster/real-node.sh.

# A certificate signed by the cluster's CA: NAME SUBJECT EXTENSIONS...
sign_certificate() {
  local name=$1 subject=$2
  shift 2
  printf '%s\n' "$@" >"$name.ext"
  openssl req -newkey rsa:2048 -nodes -subj "$subject" -keyout "$name.key" -out "$name.csr"
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
    -extfile "$name.ext" -out "$name.crt"
}

# The API server's client certificate for the kubelets (logs, exec, port-forward), and
# kube-proxy's, shared by every node.
generate_cluster_node_pki() {
  (
    cd "$STATE_DIR/pki"
    sign_certificate apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" \
      "extendedKeyUsage=clientAuth"
    sign_certificate kube-proxy "/CN=system:kube-proxy" "extendedKeyUsage=clientAuth"
    sign_certificate flannel "/CN=mlkube:flannel" "extendedKeyUsage=clientAuth"
    sign_certificate kube-router "/CN=mlkube:kube-router" "extendedKeyUsage=clientAuth"
  ) >>"$STATE_DIR/pki.log" 2>&1 || die "generating the nodes' certificates failed; see $STATE_DIR/pki.log"
  write_kubeconfig "$STATE_DIR/flannel.kubeconfig" flannel "" \
    "    client-certificate-data: $(base64 -w0 "$STATE_DIR/pki/flannel.crt")
    client-key-data: $(base64 -w0 "$STATE_DIR/pki/flannel.key")" "$NODE_IP"
  write_kubeconfig "$STATE_DIR/kube-router.kubeconfig" kube-router "" \
    "    client-certificate-data: $(base64 -w0 "$STATE_DIR/pki/kube-router.crt")
    client-key-data: $(base64 -w0 "$STATE_DIR/pki/kube-router.key")" "$NODE_IP"
}

# The node's identity (system:node:<name>, for its kubelet), its kubelet's serving
# certificate, and its kubeconfigs, which reach the API server on the nodes' bridge.
generate_node_pki() {
  local pki=$STATE_DIR/pki node=node-$NODE_INDEX
  (
    cd "$pki"
    sign_certificate "$node" "/O=system:nodes/CN=system:node:$NODE_NAME" "extendedKeyUsage=clientAuth"
    sign_certificate "$node-serving" "/O=system:nodes/CN=system:node:$NODE_NAME" \
      "extendedKeyUsage=serverAuth" "subjectAltName=IP:$NODE_ADDRESS,DNS:$NODE_NAME"
  ) >>"$STATE_DIR/pki.log" 2>&1 || die "generating $NODE_NAME's certificates failed; see $STATE_DIR/pki.log"
  mkdir -p "$NODE_DIR"
  write_kubeconfig "$NODE_DIR/node.kubeconfig" "$node" "" \
    "    client-certificate-data: $(base64 -w0 "$pki/$node.crt")
    client-key-data: $(base64 -w0 "$pki/$node.key")" "$NODE_IP"
  write_kubeconfig "$NODE_DIR/kube-proxy.kubeconfig" kube-proxy "" \
    "    client-certificate-data: $(base64 -w0 "$pki/kube-proxy.crt")
    client-key-data: $(base64 -w0 "$pki/kube-proxy.key")" "$NODE_IP"
}

# The cluster's cgroup root and the node's under it, in every hierarchy.
make_cgroup_roots() {
  local root dir
  for root in $(cgroup_roots); do
    for dir in "$root" "$root/node-$NODE_INDEX"; do
      mkdir -p "$dir"
      # A new cpuset cgroup holds no task until it has CPUs and memory nodes of its parent's.
      if [ -f "$dir/cpuset.cpus" ] && [ -z "$(cat "$dir/cpuset.cpus")" ]; then
        cat "$(dirname "$dir")/cpuset.cpus" >"$dir/cpuset.cpus"
        cat "$(dirname "$dir")/cpuset.mems" >"$dir/cpuset.mems"
      fi
    done
  done
}

write_kubelet_config() {
  local cgroup_v1_line="" oom_line=""
  cgroup_v2 || cgroup_v1_line="failCgroupV1: false  # Kubernetes 1.35 refuses cgroup v1 unless told"
  lacks_sys_resource && oom_line="oomScoreAdj: 0  # the kubelet may not lower its own without CAP_SYS_RESOURCE"
  : >"$NODE_DIR/resolv.conf" # pods inherit no resolver of the host's
  cat >"$NODE_DIR/kubelet.yaml" <<KUBELET
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_ADDRESS
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $STATE_DIR/pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $STATE_DIR/pki/node-$NODE_INDEX-serving.crt
tlsPrivateKeyFile: $STATE_DIR/pki/node-$NODE_INDEX-serving.key
containerRuntimeEndpoint: unix://$CONTAINERD_SOCKET
cgroupDriver: cgroupfs
cgroupRoot: /$NODE_CGROUP
$cgroup_v1_line
$oom_line
clusterDNS: [$NODE_IP]
clusterDomain: cluster.local
resolvConf: $NODE_DIR/resolv.conf
# The node's image filesystem is the machine's disk, which every node of every local cluster
# and everything else on the machine share: at that disk's usual fill the kubelet would collect
# the images over and over, each pulled again by the next pod. Each node's store is kept per
# cluster port instead, and only grows with what the images change.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# Absolute floors: the disk is the machine's, mostly filled by others, so a share of it (2% of
# 250 GB is 5 GB) would evict pods for what the cluster never wrote.
evictionHard: {memory.available: 100Mi, nodefs.available: 1Gi, imagefs.available: 1Gi}
failSwapOn: false
# The lease is renewed every quarter of its duration: every 5 s, four times within the
# controller-manager's 20 s grace (cluster/local/control-plane.sh).
nodeLeaseDurationSeconds: 20
serializeImagePulls: false
podLogsDir: $NODE_DIR/pod-logs
volumePluginDir: $NODE_DIR/volume-plugins
staticPodPath: ""
KUBELET
}

write_kube_proxy_config() {
  cat >"$NODE_DIR/kube-proxy.yaml" <<PROXY
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $NODE_DIR/kube-proxy.kubeconfig}
mode: iptables
hostnameOverride: $NODE_NAME
clusterCIDR: $CLUSTER_CIDR
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# The namespace's conntrack table is the host's: leave its size and timeouts alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
PROXY
}

# Cluster names only: there is nothing upstream to forward to, so every other name is NXDOMAIN
# at once (a resolver waiting on an unreachable upstream stalls init containers), and short TTLs
# (a negative answer cached for 30 s held `init-pytorch` back that long).
write_corefile() {
  cat >"$STATE_DIR/Corefile" <<COREFILE
cluster.local:53 in-addr.arpa:53 ip6.arpa:53 {
    bind $NODE_IP
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $KUBECONFIG_FILE mlkube-local
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
    cache 5
}
.:53 {
    bind $NODE_IP
    template ANY ANY {
        rcode NXDOMAIN
    }
}
COREFILE
}

node_ready() {
  kubectl_local get node "$NODE_NAME" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' | grep -qx True
}

dns_ready() { [ -n "$(ss -N "$NETNS" -lunH "sport = :53" 2>/dev/null)" ]; }

# The node use_node chose: its containerd, then (images pulled) its kubelet, kube-proxy and
# flannel; once its Node is registered, kube-router's policy controller.
start_containerd() {
  mkdir -p "$NODE_DIR/kubelet" "$NODE_DIR/pod-logs" "$NODE_DIR/volume-plugins"
  write_containerd_config
  create_node_mounts
  start_in_node_netns "containerd-$NODE_INDEX" "$(command -v containerd)" --config "$NODE_DIR/containerd.toml"
  wait_until "containerd on $NODE_NAME" 60 "containerd-$NODE_INDEX" containerd_ready
  remove_containers
  prune_images
}

start_node_agents() {
  make_cgroup_roots
  write_kubelet_config
  start_in_node_netns "kubelet-$NODE_INDEX" "$BIN_DIR/kubelet" --config "$NODE_DIR/kubelet.yaml" \
    --kubeconfig "$NODE_DIR/node.kubeconfig" --root-dir "$NODE_DIR/kubelet" \
    --cert-dir "$NODE_DIR/kubelet-pki" --hostname-override "$NODE_NAME" --node-ip "$NODE_ADDRESS" \
    --node-labels type=real
  write_kube_proxy_config
  start_in_node_netns "kube-proxy-$NODE_INDEX" "$BIN_DIR/kube-proxy" --config "$NODE_DIR/kube-proxy.yaml"
  start_flannel
}

# Every node: containerds first, the images pulled on each, then the agents; CoreDNS (in the
# cluster's namespace, on node 1's address, which every node's pods reach) and the provisioner.
start_nodes() {
  local k
  echo "$REAL_NODES" >"$STATE_DIR/nodes"
  stop_preload
  remove_old_store
  start_registry
  build_images
  push_images "$REGISTRY_HOST"
  for k in $(node_indexes); do
    use_node "$k"
    generate_node_pki
    start_containerd
  done
  pull_on_every_node
  allow_flannel
  allow_kube_router
  for k in $(node_indexes); do
    use_node "$k"
    start_node_agents
  done
  write_corefile
  start_in_netns coredns "$COREDNS_BIN" -conf "$STATE_DIR/Corefile"
  for k in $(node_indexes); do
    use_node "$k"
    wait_for_pod_network
    wait_until "the node $NODE_NAME to be Ready" 120 "kubelet-$k" node_ready
    start_kube_router
  done
  wait_until "CoreDNS on $NODE_IP:53" 30 coredns dns_ready
  use_node 1
  start_provisioner
}
