# shellcheck shell=bash
# The node's agents: the kubelet, kube-proxy and CoreDNS, with the certificates the kubelet and
# kube-proxy need, and `start_node`, which brings the whole node up. Sourced by
# cluster/real-node.sh.

build_coredns() { go_install_once CoreDNS "$COREDNS_VERSION" github.com/coredns/coredns "$COREDNS_BIN" 3; }

# A certificate signed by the cluster's CA: NAME SUBJECT EXTENSIONS...
sign_certificate() {
  local name=$1 subject=$2
  shift 2
  printf '%s\n' "$@" >"$name.ext"
  openssl req -newkey rsa:2048 -nodes -subj "$subject" -keyout "$name.key" -out "$name.csr"
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
    -extfile "$name.ext" -out "$name.crt"
}

generate_node_pki() {
  (
    cd "$STATE_DIR/pki"
    # The API server's own client certificate for the kubelet (logs, exec, port-forward).
    sign_certificate apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" \
      "extendedKeyUsage=clientAuth"
    sign_certificate node "/O=system:nodes/CN=system:node:$NODE_NAME" "extendedKeyUsage=clientAuth"
    sign_certificate kubelet-serving "/O=system:nodes/CN=system:node:$NODE_NAME" \
      "extendedKeyUsage=serverAuth" "subjectAltName=IP:$NODE_IP,DNS:$NODE_NAME"
    sign_certificate kube-proxy "/CN=system:kube-proxy" "extendedKeyUsage=clientAuth"
  ) >>"$STATE_DIR/pki.log" 2>&1 || die "generating the node's certificates failed; see $STATE_DIR/pki.log"
  local pki=$STATE_DIR/pki who
  for who in node kube-proxy; do
    write_kubeconfig "$NODE_DIR/$who.kubeconfig" "$who" "" \
      "    client-certificate-data: $(base64 -w0 "$pki/$who.crt")
    client-key-data: $(base64 -w0 "$pki/$who.key")"
  done
}

make_cgroup_roots() {
  local root parent
  for root in $(cgroup_roots); do
    mkdir -p "$root"
    parent=$(dirname "$root")
    # A new cpuset cgroup holds no task until it has CPUs and memory nodes of its parent's.
    if [ -f "$root/cpuset.cpus" ] && [ -z "$(cat "$root/cpuset.cpus")" ]; then
      cat "$parent/cpuset.cpus" >"$root/cpuset.cpus"
      cat "$parent/cpuset.mems" >"$root/cpuset.mems"
    fi
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
address: $NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $STATE_DIR/pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $STATE_DIR/pki/kubelet-serving.crt
tlsPrivateKeyFile: $STATE_DIR/pki/kubelet-serving.key
containerRuntimeEndpoint: unix://$CONTAINERD_SOCKET
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_ROOT
$cgroup_v1_line
$oom_line
clusterDNS: [$NODE_IP]
clusterDomain: cluster.local
resolvConf: $NODE_DIR/resolv.conf
# Images cannot come back once collected: nothing is pulled here.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 2%, imagefs.available: 2%}
failSwapOn: false
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
clusterCIDR: $POD_CIDR
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
  cat >"$NODE_DIR/Corefile" <<COREFILE
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

start_node() {
  mkdir -p "$NODE_DIR/kubelet" "$NODE_DIR/pod-logs" "$NODE_DIR/volume-plugins"
  write_containerd_config
  start_in_netns containerd "$(command -v containerd)" --config "$NODE_DIR/containerd.toml"
  wait_until "containerd" 60 containerd containerd_ready
  remove_containers
  import_images
  make_cgroup_roots
  write_kubelet_config
  start_in_netns kubelet "$BIN_DIR/kubelet" --config "$NODE_DIR/kubelet.yaml" \
    --kubeconfig "$NODE_DIR/node.kubeconfig" --root-dir "$NODE_DIR/kubelet" \
    --cert-dir "$NODE_DIR/kubelet-pki" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" \
    --node-labels type=real
  write_kube_proxy_config
  start_in_netns kube-proxy "$BIN_DIR/kube-proxy" --config "$NODE_DIR/kube-proxy.yaml"
  write_corefile
  start_in_netns coredns "$COREDNS_BIN" -conf "$NODE_DIR/Corefile"
  wait_until "the node $NODE_NAME to be Ready" 120 kubelet node_ready
  wait_until "CoreDNS on $NODE_IP:53" 30 coredns dns_ready
  start_provisioner
}
