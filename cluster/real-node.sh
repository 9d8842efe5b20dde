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

in_netns() { nsenter --net="$NETNS_PATH" "$@"; }

# ---------------------------------------------------------------------------------------------
# what the machine needs

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

build_coredns() {
  [ -x "$COREDNS_BIN" ] && return 0
  require_go
  local log=$CACHE_ROOT/coredns-$COREDNS_VERSION/build.log
  mkdir -p "$(dirname "$COREDNS_BIN")"
  say "building CoreDNS $COREDNS_VERSION once (about 3 minutes on 2 cores); log: $log"
  GOBIN=$(dirname "$COREDNS_BIN") CGO_ENABLED=0 go install -trimpath -ldflags=-s \
    "github.com/coredns/coredns@$COREDNS_VERSION" >"$log" 2>&1 ||
    die "building CoreDNS failed; the last lines of $log:" "$(tail -n 15 "$log" | tr '\n' ' ')"
}

# The provisioner's main package is its module's root, and its go.mod has no replaces: a plain
# `go install` builds it.
build_local_path_provisioner() {
  [ -x "$LOCAL_PATH_BIN" ] && return 0
  require_go
  local log=$CACHE_ROOT/local-path-provisioner-$LOCAL_PATH_VERSION/build.log started=$SECONDS
  mkdir -p "$(dirname "$LOCAL_PATH_BIN")"
  say "building local-path-provisioner $LOCAL_PATH_VERSION once (about 2 minutes on 2 cores); log: $log"
  GOBIN=$(dirname "$LOCAL_PATH_BIN") CGO_ENABLED=0 nice go install -trimpath \
    -ldflags="-s -X main.VERSION=$LOCAL_PATH_VERSION" \
    "github.com/rancher/local-path-provisioner@$LOCAL_PATH_VERSION" >"$log" 2>&1 ||
    die "building local-path-provisioner failed; the last lines of $log:" "$(tail -n 15 "$log" | tr '\n' ' ')"
  say "built local-path-provisioner in $((SECONDS - started))s"
}

# ---------------------------------------------------------------------------------------------
# the network namespace

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
  setsid socat "TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork" \
    "EXEC:nsenter --net=$NETNS_PATH socat STDIO TCP\\:$host\\:$target_port" \
    >"$STATE_DIR/$name.log" 2>&1 </dev/null &
  echo $! >"$STATE_DIR/$name.pid"
}

# ---------------------------------------------------------------------------------------------
# certificates of the node

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

# ---------------------------------------------------------------------------------------------
# containerd and its images

write_containerd_config() {
  local restrict_oom=false
  lacks_sys_resource && restrict_oom=true
  mkdir -p "$NODE_DIR/cni" "$CONTAINERD_ROOT"
  cat >"$NODE_DIR/containerd.toml" <<CONTAINERD
version = 2
root = "$CONTAINERD_ROOT"
state = "$STATE_DIR/containerd"

[grpc]
  address = "$CONTAINERD_SOCKET"

[ttrpc]
  address = "$STATE_DIR/containerd.sock.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "$STATE_DIR/containerd-opt"

[plugins."io.containerd.grpc.v1.cri"]
  # No registry is reachable: the sandbox image is built locally and imported.
  sandbox_image = "$PAUSE_IMAGE"
  # Without CAP_SYS_RESOURCE, lowering a sandbox's oom_score_adj fails every pod.
  restrict_oom_score_adj = $restrict_oom
  # Pods' network namespaces are mounted under the state dir, which \`down\` unmounts.
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "$STATE_DIR/runc"
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$NODE_DIR/cni"
CONTAINERD
  # One bridge for the pods; the namespace has no uplink, so no masquerade.
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
        "ranges": [[{"subnet": "$POD_CIDR"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
CNI
}

ctr_node() { ctr --address "$CONTAINERD_SOCKET" --namespace k8s.io "$@"; }

containerd_ready() { ctr_node version; }

# Containers a crashed run left in the kept image store would come back as sandboxes the
# kubelet never made: remove them before the kubelet starts (and at `down`).
remove_containers() {
  local ids
  ids=$(ctr_node tasks ls -q 2>/dev/null || true)
  if [ -n "$ids" ]; then
    # shellcheck disable=SC2086
    for id in $ids; do ctr_node tasks kill --signal SIGKILL "$id" >/dev/null 2>&1 || true; done
    for id in $ids; do ctr_node tasks delete --force "$id" >/dev/null 2>&1 || true; done
  fi
  ids=$(ctr_node containers ls -q 2>/dev/null || true)
  # shellcheck disable=SC2086
  [ -z "$ids" ] || ctr_node containers delete $ids >/dev/null 2>&1 || true
}

# The digest of the manifest an OCI archive holds.
archive_digest() {
  { tar -xOf "$1" index.json 2>/dev/null || tar -xOf "$1" ./index.json 2>/dev/null || true; } |
    grep -o 'sha256:[0-9a-f]\{64\}' | head -n1 || true
}

# The node's images (the NAMEs image/node-images.sh takes, or all) built, and imported into the
# node's containerd unless it has them already.
import_images() {
  local list=$STATE_DIR/images.list ref archive digest have
  say "building the node's images (image/node-images.sh; cached after the first time)"
  "${MLKUBE_NODE_IMAGES:-$REPO_DIR/image/node-images.sh}" "$@" >"$list" 2>"$STATE_DIR/images.log" ||
    die "building the node's images failed; the last lines of $STATE_DIR/images.log:" \
      "$(tail -n 10 "$STATE_DIR/images.log" | tr '\n' ' ')"
  while read -r ref archive; do
    [ -n "$ref" ] || continue
    digest=$(archive_digest "$archive")
    have=$(ctr_node images ls "name==$ref" 2>/dev/null | awk 'NR > 1 {print $3}')
    if [ -n "$digest" ] && [ "$have" = "$digest" ]; then continue; fi
    say "importing $ref ($(($(stat -c %s "$archive") / 1024 / 1024)) MiB)"
    # The archive names the image by its tag alone; --base-name gives it the repository.
    ctr_node images import --base-name "${ref%:*}" "$archive" >>"$STATE_DIR/images.log" 2>&1 ||
      die "importing $archive into the node's containerd failed; see $STATE_DIR/images.log"
    ctr_node images ls "name==$ref" 2>/dev/null | grep -q "$ref" ||
      die "$ref is not in the node's containerd after importing $archive; see $STATE_DIR/images.log"
  done <"$list"
}

# Import images (NAMEs, or all) into the node's kept image store ahead of its `up`, through a
# containerd of their own on that store, stopped after; its state and logs go to
# $CACHE_ROOT/node/preload-<API port>. cluster/run-tests.sh does this while the kwok tests run.
preload_images() {
  require_real_node_host
  [ ! -e "$NETNS_PATH" ] || die "a real node on port $API_PORT is up; its containerd holds the store" \
    "stop it first (cluster/local-cluster.sh down), or let its next up import the images"
  # The helpers below read these: here they name the preload's own directory.
  local STATE_DIR=$CACHE_ROOT/node/preload-$API_PORT
  local NODE_DIR=$STATE_DIR/node CONTAINERD_SOCKET=$STATE_DIR/containerd.sock pid
  rm -rf "$STATE_DIR"
  mkdir -p "$STATE_DIR"
  write_containerd_config
  containerd --config "$NODE_DIR/containerd.toml" >"$STATE_DIR/containerd.log" 2>&1 &
  pid=$!
  echo "$pid" >"$STATE_DIR/containerd.pid"
  wait_until "containerd" 60 containerd containerd_ready
  import_images "$@"
  kill "$pid"
  wait "$pid" || true
  say "preloaded the node's images into $CONTAINERD_ROOT"
}

# ---------------------------------------------------------------------------------------------
# kubelet, kube-proxy, CoreDNS

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

# Start NAME in the namespace: the binary from BIN (its path) with ARGS.
start_in_netns() {
  local name=$1 binary=$2
  shift 2
  setsid nsenter --net="$NETNS_PATH" "$binary" "$@" >"$STATE_DIR/$name.log" 2>&1 </dev/null &
  echo $! >"$STATE_DIR/$name.pid"
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

# ---------------------------------------------------------------------------------------------
# volumes: local-path-provisioner and the default StorageClass

# The helper pods' image: the busybox image/node-images.sh built (its tag is busybox's version).
helper_image() { awk '$1 ~ /\/busybox:/ {print $1; exit}' "$STATE_DIR/images.list"; }

# The provisioner's namespace, the ServiceAccount of its helper pods, its config (volumes under
# the node's state dir; the scripts the helper pods run; their pod, as root, since they make and
# remove directories in root's state dir) and the default StorageClass. A claim binds when its
# first pod is scheduled, as the provisioner needs the node.
storage_manifest() {
  local helper=$1
  cat <<MANIFEST
apiVersion: v1
kind: Namespace
metadata: {name: $LOCAL_PATH_NAMESPACE}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: local-path-provisioner-service-account, namespace: $LOCAL_PATH_NAMESPACE}
automountServiceAccountToken: false
---
apiVersion: v1
kind: ConfigMap
metadata: {name: local-path-config, namespace: $LOCAL_PATH_NAMESPACE}
data:
  config.json: |-
    {"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["$NODE_DIR/volumes"]}]}
  setup: |-
    #!/bin/sh
    set -eu
    mkdir -m 0777 -p "\$VOL_DIR"
  teardown: |-
    #!/bin/sh
    set -eu
    rm -rf "\$VOL_DIR"
  helperPod.yaml: |-
    apiVersion: v1
    kind: Pod
    metadata: {name: helper-pod}
    spec:
      securityContext: {runAsUser: 0}
      containers:
      - name: helper-pod
        image: $helper
        imagePullPolicy: Never
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: $STORAGE_CLASS
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: rancher.io/local-path
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Delete
MANIFEST
}

start_provisioner() {
  local helper
  helper=$(helper_image)
  [ -n "$helper" ] || die "image/node-images.sh built no busybox image for the provisioner's helper pods"
  mkdir -p "$NODE_DIR/volumes"
  storage_manifest "$helper" | kubectl_local apply -f - >"$STATE_DIR/storage.log" 2>&1 ||
    die "creating the StorageClass and the provisioner's config failed; see $STATE_DIR/storage.log"
  start_in_netns local-path-provisioner "$LOCAL_PATH_BIN" --debug start --kubeconfig "$KUBECONFIG_FILE" \
    --namespace "$LOCAL_PATH_NAMESPACE" --helper-image "$helper" --configmap-name local-path-config
}

# ---------------------------------------------------------------------------------------------
# down, also after a crashed run

# Every process whose network namespace is this cluster's (containerd's shims included).
processes_in_netns() {
  local inode pid
  inode=$(stat -Lc %i "$NETNS_PATH" 2>/dev/null) || return 0
  for pid in /proc/[0-9]*; do
    [ "$(stat -Lc %i "$pid/ns/net" 2>/dev/null)" = "$inode" ] && echo "${pid#/proc/}"
  done
  return 0
}

# Every process in this cluster's pod cgroups (containers run in pod namespaces of their own).
processes_in_cgroups() {
  local root
  for root in $(cgroup_roots); do
    [ -d "$root" ] && find "$root" -name cgroup.procs -exec cat {} + 2>/dev/null
  done
  return 0
}

kill_all() {
  local pids
  pids=$( { processes_in_cgroups; processes_in_netns; } | sort -u | tr '\n' ' ')
  [ -n "${pids// /}" ] || return 0
  # shellcheck disable=SC2086
  kill -KILL $pids 2>/dev/null || true
}

unmount_under() {
  local dir=$1 mounts
  [ -n "$dir" ] || return 0
  # Deepest first; a mount still busy is detached lazily.
  mounts=$(awk -v dir="$dir/" 'index($5, dir) == 1 {print $5}' /proc/self/mountinfo | sort -r)
  for m in $mounts; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
}

remove_cgroups() {
  local root
  for root in $(cgroup_roots); do
    [ -d "$root" ] && find "$root" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  return 0
}

# Paths the kubelet, runc and the CNI plugins use whatever they are told.
remove_fixed_paths() {
  rm -f /var/lib/cni/results/"$CNI_NETWORK"-* 2>/dev/null || true
  pgrep -x kubelet >/dev/null || rm -rf /var/lib/kubelet/device-plugins
  rmdir /var/lib/kubelet 2>/dev/null || true
  pgrep -f containerd-shim >/dev/null || rm -rf /run/containerd/s
}

down_real() {
  stop_operator
  # First what would recreate pods, then the node, then the rest of the control plane.
  stop_components kube-controller-manager kube-scheduler local-path-provisioner
  stop_components kubelet kube-proxy coredns
  if is_running containerd; then
    remove_containers
    stop_components containerd
  fi
  stop_components kube-apiserver etcd forwarder gateway-forwarder
  kill_all
  unmount_under "$STATE_DIR"
  remove_cgroups
  [ -e "$NETNS_PATH" ] && ip netns delete "$NETNS" 2>/dev/null
  remove_fixed_paths
}

# What `down` leaves behind, if anything (used by `status` and the tests of `down`).
leftovers_real() {
  local m p
  [ -e "$NETNS_PATH" ] && echo "network namespace $NETNS"
  p=$( { processes_in_cgroups; processes_in_netns; } | sort -u | tr '\n' ' ')
  [ -z "${p// /}" ] || echo "processes $p"
  m=$(awk -v dir="$STATE_DIR/" 'index($5, dir) == 1 {print $5}' /proc/self/mountinfo)
  [ -z "$m" ] || echo "mounts $(echo "$m" | tr '\n' ' ')"
  for c in $(cgroup_roots); do [ -d "$c" ] && echo "cgroup $c"; done
  return 0
}
