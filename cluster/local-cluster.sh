#!/usr/bin/env bash
# The local Kubernetes control plane that mlkube's tests and quickstart run against.
#
# Builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kubelet and
# kube-proxy from upstream Go modules, with their version stamped as upstream's release build
# does, plus kwok to simulate nodes and kubelets (its pod lifecycles are
# cluster/kwok-stages.yaml), caches the binaries outside the repository keyed by version, and
# runs them on 127.0.0.1 with TLS.
#
# Two kinds of node (MLKUBE_CLUSTER_NODE, remembered by the cluster until `down`):
#   kwok (default)  simulated nodes whose pods run no container: fast, for thousands of pods
#   real            one real node (containerd, kubelet, kube-proxy, CoreDNS) where containers
#                   run, in a network namespace of the cluster's own: see cluster/real-node.sh
#
#   cluster/local-cluster.sh build    build (once) the binaries into the cache
#   cluster/local-cluster.sh build-node  build (once) what only a real node runs: CoreDNS and
#                                     local-path-provisioner (run-tests.sh builds them ahead)
#   cluster/local-cluster.sh node-tools  install (root, apt-get) what a real node and its images
#                                     need, if missing (run-tests.sh does it ahead)
#   cluster/local-cluster.sh preload [IMAGE...]  build the real node's images (the names
#                                     image/node-images.sh takes, or all) and import them into
#                                     its kept image store while no real node runs (run-tests.sh
#                                     does it ahead, so that the node's up imports little)
#   cluster/local-cluster.sh up       build if needed, start, wait for /readyz and Ready nodes
#   cluster/local-cluster.sh down     stop everything (the operator too), remove the state dir
#   cluster/local-cluster.sh env      print `export KUBECONFIG=...` and put kubectl on PATH
#   cluster/local-cluster.sh status   say what runs and whether the API server is ready
#   cluster/local-cluster.sh node-kind [--running]
#                                     kwok or real: the cluster's, else what `up` would start
#   cluster/local-cluster.sh leftovers  list what a real node's `down` left (processes, mounts,
#                                     cgroups, the namespace); exit 1 if anything
#   cluster/local-cluster.sh operator NAMESPACE SERVICEACCOUNT [ARGS...]
#                                     (re)start `mlkube operator ARGS` (mlkube from PATH, or
#                                     $MLKUBE_BIN) beside the cluster as that ServiceAccount
#
# The API server advertises no endpoints for the `kubernetes` Service: its only address is on the
# loopback range, which Endpoints reject, and nothing in this cluster dials it.
#
# Settings (environment): MLKUBE_CACHE (default ~/.cache/mlkube), MLKUBE_CLUSTER_DIR (default
# $TMPDIR/mlkube-cluster), MLKUBE_CLUSTER_PORT (API server port, default 16443; etcd, the
# other components and the operator's metrics and health endpoints take the 7 ports above it),
# MLKUBE_CLUSTER_NODES (kwok nodes without GPUs, default 1: kwok-node-0, kwok-node-1, ...; one
# GPU node is always added; a bench of tens of thousands of pods wants tens of nodes, as the
# scheduler slows with the pods a node holds), MLKUBE_CLUSTER_NODE (kwok or real, above).
set -euo pipefail

K8S_VERSION=v1.35.4
K8S_STAGING_VERSION=v0.35.4
ETCD_VERSION=v3.6.5
KWOK_VERSION=v0.7.0
# Part of the cache key: bump it when the build itself changes, so no stale binaries are reused.
# 2: versions stamped (before, `kubectl version` said v0.0.0-master and exited 1).
# 3: kubelet and kube-proxy, for the real node.
BUILD_REVISION=3

CACHE_ROOT=${MLKUBE_CACHE:-$HOME/.cache/mlkube}
BIN_DIR=$CACHE_ROOT/controlplane/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION-build$BUILD_REVISION/bin
STATE_DIR=${MLKUBE_CLUSTER_DIR:-${TMPDIR:-/tmp}/mlkube-cluster}
KUBECONFIG_FILE=$STATE_DIR/admin.kubeconfig
REPO_DIR=$(cd "$(dirname "$0")/.." && pwd)
KWOK_STAGES=$REPO_DIR/cluster/kwok-stages.yaml
PAUSE_IMAGE=docker.io/mlkube/pause:3.10

API_PORT=${MLKUBE_CLUSTER_PORT:-16443}
NODES=${MLKUBE_CLUSTER_NODES:-1}
ETCD_CLIENT_PORT=$((API_PORT + 1))
ETCD_PEER_PORT=$((API_PORT + 2))
CONTROLLER_MANAGER_PORT=$((API_PORT + 3))
SCHEDULER_PORT=$((API_PORT + 4))
KWOK_PORT=$((API_PORT + 5))
OPERATOR_METRICS_PORT=$((API_PORT + 6))
OPERATOR_HEALTH_PORT=$((API_PORT + 7))
ALL_PORTS=("$API_PORT" "$ETCD_CLIENT_PORT" "$ETCD_PEER_PORT" "$CONTROLLER_MANAGER_PORT" "$SCHEDULER_PORT" "$KWOK_PORT"
  "$OPERATOR_METRICS_PORT" "$OPERATOR_HEALTH_PORT")
KWOK_COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)


say() { printf 'local-cluster: %s\n' "$*" >&2; }
die() {
  printf 'local-cluster: error: %s\n' "$1" >&2
  shift
  for hint in "$@"; do printf '  hint: %s\n' "$hint" >&2; done
  exit 1
}
# die saying WHAT failed, with the last lines (LINES, default 15) of LOG as its hint.
die_with_log() {
  local what=$1 log=$2 lines=${3:-15}
  die "$what; the last lines of $log:" "$(tail -n "$lines" "$log" | tr '\n' ' ')"
}

# The kind of node: the running cluster's, else MLKUBE_CLUSTER_NODE's.
node_kind() {
  local kind
  kind=$(cat "$STATE_DIR/node-kind" 2>/dev/null || echo "${MLKUBE_CLUSTER_NODE:-kwok}")
  case "$kind" in
    kwok | real) echo "$kind" ;;
    *) die "MLKUBE_CLUSTER_NODE=$kind is not a kind of node" "use kwok (simulated nodes, the default) or real" ;;
  esac
}
NODE_KIND=$(node_kind)
# shellcheck source=SCRIPTDIR/real-node.sh
. "$REPO_DIR/cluster/real-node.sh"
if [ "$NODE_KIND" = real ]; then COMPONENTS=("${REAL_COMPONENTS[@]}"); else COMPONENTS=("${KWOK_COMPONENTS[@]}"); fi

# ---------------------------------------------------------------------------------------------
# build

require_go() {
  command -v go >/dev/null 2>&1 ||
    die "the Go toolchain is not on PATH; it is needed once, to build the control plane" \
      "install Go 1.25 or newer, put its bin directory on PATH, and run this again"
  local version
  version=$(go env GOVERSION 2>/dev/null | sed 's/^go//')
  case "$version" in
    1.2[5-9]* | 1.[3-9][0-9]* | [2-9].*) ;;
    *) die "Go $version is too old to build Kubernetes $K8S_VERSION" "install Go 1.25 or newer and put it first on PATH" ;;
  esac
}

# Go's main package MODULE@VERSION built once with `go install` as BIN (a path ending in
# bin/<command>), at a low priority, its log beside that bin directory: NAME VERSION MODULE BIN
# MINUTES (how long it takes on 2 cores, to say so) [LINKER FLAGS].
go_install_once() {
  local name=$1 version=$2 module=$3 bin=$4 minutes=$5 ldflags=${6:--s} log started=$SECONDS
  [ -x "$bin" ] && return 0
  require_go
  log=$(dirname "$(dirname "$bin")")/build.log
  mkdir -p "$(dirname "$bin")"
  say "building $name $version once (about $minutes minutes on 2 cores); log: $log"
  GOBIN=$(dirname "$bin") CGO_ENABLED=0 nice go install -trimpath -ldflags="$ldflags" "$module@$version" \
    >"$log" 2>&1 || die_with_log "building $name failed" "$log"
  say "built $name in $((SECONDS - started))s"
}

have_binaries() {
  local b
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy kwok; do
    [ -x "$BIN_DIR/$b" ] || return 1
  done
}

# The Kubernetes commands live in k8s.io/kubernetes, whose go.mod points its k8s.io/* staging
# modules at local paths; a module of our own must pin each of them to the published v0.X.Y.
# etcd is built in the same module so that it shares one pinned dependency set.
write_controlplane_module() {
  local dir=$1 staging
  staging=$(sed -n 's#^\s*\(k8s\.io/[a-z0-9-]*\) => ./staging/.*#\1#p' \
    "$(go env GOMODCACHE)/k8s.io/kubernetes@$K8S_VERSION/go.mod")
  [ -n "$staging" ] || die "could not read the staging modules of k8s.io/kubernetes@$K8S_VERSION"
  {
    echo "module mlkube.local/controlplane"
    echo
    echo "go 1.25.0"
    echo
    echo "require ("
    echo "	k8s.io/kubernetes $K8S_VERSION"
    echo "	go.etcd.io/etcd/server/v3 $ETCD_VERSION"
    echo "	go.etcd.io/etcd/api/v3 $ETCD_VERSION"
    echo "	go.etcd.io/etcd/client/pkg/v3 $ETCD_VERSION"
    echo "	go.etcd.io/etcd/client/v3 $ETCD_VERSION"
    echo "	go.etcd.io/etcd/pkg/v3 $ETCD_VERSION"
    echo ")"
    echo
    echo "replace ("
    for m in $staging; do echo "	$m => $m $K8S_STAGING_VERSION"; done
    echo ")"
  } >"$dir/go.mod"
}

# The linker flags that stamp the Kubernetes version into its binaries, as upstream's release
# build does (hack/lib/version.sh): k8s.io/component-base/version serves `/version` and
# `kubectl version --client`, client-go's copy names the client to the server. Without them
# both say v0.0.0-master+$Format:%H$, `kubectl version` exits 1, and tools that compare
# versions (Tanka's "obtaining versions") refuse the cluster. The module proxy serves the source
# without its git history, so the commit is left empty and the tree state is `archive`,
# upstream's word for a tree that did not come from a git checkout.
version_ldflags() {
  local major minor package flags="-s"
  major=${K8S_VERSION#v}
  minor=${major#*.}
  major=${major%%.*}
  minor=${minor%%.*}
  for package in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $package.gitVersion=$K8S_VERSION -X $package.gitMajor=$major -X $package.gitMinor=$minor"
    flags+=" -X $package.gitCommit= -X $package.gitTreeState=archive"
    flags+=" -X $package.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  done
  echo "$flags"
}

build() {
  if have_binaries; then
    say "binaries are cached in $BIN_DIR"
    return 0
  fi
  require_go
  local work log started=$SECONDS
  work=$CACHE_ROOT/controlplane/build-$K8S_VERSION
  log=$work/build.log
  mkdir -p "$work" "$BIN_DIR"
  : >"$log"
  say "building the control plane once (k8s $K8S_VERSION, etcd $ETCD_VERSION, kwok $KWOK_VERSION); log: $log"
  say "this takes 6-7 minutes on 2 idle cores (far longer on a busy machine); later runs use the cache"
  (
    cd "$work"
    go mod download "k8s.io/kubernetes@$K8S_VERSION"
    write_controlplane_module "$work"
    GOFLAGS=-mod=mod go mod download all
    GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags="$(version_ldflags)" -o "$BIN_DIR/" \
      go.etcd.io/etcd/server/v3 \
      k8s.io/kubernetes/cmd/kube-apiserver \
      k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler \
      k8s.io/kubernetes/cmd/kubectl \
      k8s.io/kubernetes/cmd/kubelet \
      k8s.io/kubernetes/cmd/kube-proxy
    # etcd's main package is its server module, so the binary comes out named after it.
    mv "$BIN_DIR/server" "$BIN_DIR/etcd"
  ) >>"$log" 2>&1 || die_with_log "building the Kubernetes control plane failed" "$log"
  (
    # kwok is a client of the API server only; it keeps its own dependency set.
    GOBIN=$BIN_DIR CGO_ENABLED=0 go install -trimpath -ldflags=-s "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  ) >>"$log" 2>&1 || die_with_log "building kwok failed" "$log"
  have_binaries || die "the build finished but binaries are missing from $BIN_DIR"
  say "built in $((SECONDS - started))s into $BIN_DIR"
}

# ---------------------------------------------------------------------------------------------
# certificates and kubeconfig

generate_pki() {
  local pki=$STATE_DIR/pki
  mkdir -p "$pki"
  (
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=mlkube-local-ca" \
      -keyout ca.key -out ca.crt
    openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout apiserver.key -out apiserver.csr
    printf '%s\n' "subjectAltName=IP:127.0.0.1,IP:10.0.0.1,IP:$NODE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" \
      "extendedKeyUsage=serverAuth" >apiserver.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile apiserver.ext -out apiserver.crt
    openssl req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=mlkube-admin" -keyout admin.key -out admin.csr
    printf '%s\n' "extendedKeyUsage=clientAuth" >admin.ext
    openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile admin.ext -out admin.crt
    openssl genrsa -out sa.key 2048
    openssl rsa -in sa.key -pubout -out sa.pub
  ) >"$STATE_DIR/pki.log" 2>&1 || die "generating certificates with openssl failed; see $STATE_DIR/pki.log"
  write_kubeconfig "$KUBECONFIG_FILE" mlkube-admin "" \
    "    client-certificate-data: $(base64 -w0 "$pki/admin.crt")
    client-key-data: $(base64 -w0 "$pki/admin.key")"
}

# A kubeconfig for this cluster, readable by its owner only: FILE USER NAMESPACE CREDENTIALS,
# where CREDENTIALS are the lines of the user's entry (a client certificate, or a token).
write_kubeconfig() {
  local file=$1 user=$2 namespace=$3 credentials=$4 namespace_line=""
  [ -z "$namespace" ] || namespace_line=$'\n'"    namespace: $namespace"
  (
    umask 077
    cat >"$file" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: mlkube-local
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $(base64 -w0 "$STATE_DIR/pki/ca.crt")
users:
- name: $user
  user:
$credentials
contexts:
- name: mlkube-local
  context:
    cluster: mlkube-local
    user: $user$namespace_line
current-context: mlkube-local
KUBECONFIG
  )
}

# ---------------------------------------------------------------------------------------------
# processes

pid_of() { cat "$STATE_DIR/$1.pid" 2>/dev/null || true; }

is_running() {
  local pid
  pid=$(pid_of "$1")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# Start NAME, a process of the cluster: COMMAND... in a session of its own, its output in
# $STATE_DIR/NAME.log and its pid in NAME.pid, where pid_of, is_running and wait_until look.
spawn() {
  local name=$1
  shift
  setsid "$@" >"$STATE_DIR/$name.log" 2>&1 </dev/null &
  echo $! >"$STATE_DIR/$name.pid"
}

# Start a control-plane binary: on the host with kwok, in the node's network namespace otherwise.
start() {
  local name=$1
  shift
  if [ "$NODE_KIND" = real ]; then start_in_netns "$name" "$BIN_DIR/$name" "$@"; else spawn "$name" "$BIN_DIR/$name" "$@"; fi
}

# SIGTERM to each of the named processes at once, SIGKILL to those still running 15 s later;
# returns once they are gone.
stop_components() {
  local name pid deadline
  for name in "$@"; do
    pid=$(pid_of "$name")
    if [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null || true; fi
  done
  deadline=$((SECONDS + 15))
  for name in "$@"; do
    while is_running "$name" && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
    if is_running "$name"; then kill -KILL "$(pid_of "$name")" 2>/dev/null || true; fi
    while is_running "$name"; do sleep 0.1; done
  done
}

port_owner() { ss -ltnpH "sport = :$1" 2>/dev/null | head -n1; }

check_ports_free() {
  local port owner ports=("${ALL_PORTS[@]}")
  # With a real node only the forwarders and the operator beside the cluster listen on the host.
  [ "$NODE_KIND" = kwok ] || ports=("$API_PORT" "$GATEWAY_PORT" "$OPERATOR_METRICS_PORT" "$OPERATOR_HEALTH_PORT")
  for port in "${ports[@]}"; do
    owner=$(port_owner "$port")
    if [ -n "$owner" ]; then
      die "port $port on 127.0.0.1 is already taken: $owner" \
        "stop whatever listens there, or choose other ports with MLKUBE_CLUSTER_PORT=<base> (the base and the 7 ports above it)"
    fi
  done
}

# Wait until the command `check` succeeds, for at most `seconds`, failing early with the log of
# `component` if that process exits.
wait_until() {
  local what=$1 seconds=$2 component=$3 check=$4 deadline
  deadline=$((SECONDS + seconds))
  until eval "$check" >/dev/null 2>&1; do
    if ! is_running "$component"; then
      die_with_log "$component exited while waiting for $what" "$STATE_DIR/$component.log" 8
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      die "timed out after ${seconds}s waiting for $what; see $STATE_DIR/$component.log"
    fi
    sleep 0.2
  done
}

# Run a command where the control plane listens: the host with kwok, the node's namespace otherwise.
in_cluster_net() {
  if [ "$NODE_KIND" = real ]; then in_netns "$@"; else "$@"; fi
}

kubectl_local() { "$BIN_DIR/kubectl" --kubeconfig "$KUBECONFIG_FILE" "$@"; }

api_ready() {
  curl -fsS --max-time 2 --cacert "$STATE_DIR/pki/ca.crt" --cert "$STATE_DIR/pki/admin.crt" \
    --key "$STATE_DIR/pki/admin.key" "https://127.0.0.1:$API_PORT/readyz" | grep -qx ok
}

all_running() {
  local c
  for c in "${COMPONENTS[@]}"; do is_running "$c" || return 1; done
}

# Two simulated nodes, one of them with GPUs. kwok manages the nodes that carry its annotation;
# its default stages make them Ready and bring their pods to Running. Their CPU is room for the
# operator bench, not a machine's: 1,000 PyTorchJobs give 3,000 workers whose `init-pytorch`
# init container requests 50m each (150 CPUs), and with 64 CPUs a node, hundreds of them stayed
# Pending, so the bench never saw every job Running. Their pod count is room for the bench at
# 10,000 TFJobs (40,000 pods).
node_manifest() {
  local name=$1 gpus=$2 extra_capacity="" extra_label=""
  if [ "$gpus" -gt 0 ]; then
    extra_capacity=", nvidia.com/gpu: \"$gpus\""
    extra_label="nvidia.com/gpu.present: \"true\""
  fi
  cat <<NODE
apiVersion: v1
kind: Node
metadata:
  name: $name
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/hostname: $name
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    node-role.kubernetes.io/agent: ""
    type: kwok
    $extra_label
status:
  allocatable: {cpu: "512", memory: 256Gi, pods: "50000"$extra_capacity}
  capacity: {cpu: "512", memory: 256Gi, pods: "50000"$extra_capacity}
  nodeInfo:
    architecture: amd64
    kubeletVersion: $K8S_VERSION-kwok
    operatingSystem: linux
NODE
}

nodes_ready() {
  [ "$(kubectl_local get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True)" -ge $((NODES + 1)) ]
}

up() {
  # A command that fails where no check expected it still says where, not exit silently.
  set -E
  trap 'printf "local-cluster: error: \`%s\` failed (exit %s) at %s:%s; logs are in %s\n" "$BASH_COMMAND" "$?" "${BASH_SOURCE[0]##*/}" "$LINENO" "$STATE_DIR" >&2' ERR
  if [ -d "$STATE_DIR" ] && all_running && api_ready; then
    say "already up"
    env_line
    return 0
  fi
  if [ -d "$STATE_DIR" ] || { [ "$NODE_KIND" = real ] && [ -e "$NETNS_PATH" ]; }; then
    say "a previous cluster in $STATE_DIR is only partly running; stopping it first"
    down
    NODE_KIND=$(node_kind)
  fi
  command -v openssl >/dev/null || die "openssl is not on PATH" "install it: apt-get install openssl"
  command -v curl >/dev/null || die "curl is not on PATH" "install it: apt-get install curl"
  [ "$NODE_KIND" = kwok ] || require_real_node_host
  check_ports_free
  build
  if [ "$NODE_KIND" = real ]; then
    build_coredns
    build_local_path_provisioner
  fi
  local started=$SECONDS
  mkdir -p "$STATE_DIR/bin" "$NODE_DIR"
  echo "$NODE_KIND" >"$STATE_DIR/node-kind"
  # Only kubectl goes on the PATH that `env` prints, not the servers beside it.
  ln -sf "$BIN_DIR/kubectl" "$STATE_DIR/bin/kubectl"
  generate_pki
  if [ "$NODE_KIND" = real ]; then
    generate_node_pki
    create_netns
    start_forwarder
  fi
  start_control_plane
  if [ "$NODE_KIND" = real ]; then start_node; else start_kwok_nodes; fi
  # Pods need their namespace's default ServiceAccount, which the controller-manager creates.
  wait_until "the default ServiceAccount" 60 kube-controller-manager \
    "kubectl_local get serviceaccount default -n default"
  say "up in $((SECONDS - started))s with nodes: $(kubectl_local get nodes --no-headers | awk '{print $1}' | tr '\n' ' ')"
  env_line
}

# The API server's flags that depend on the node: with kwok it advertises no endpoint (its only
# address is loopback, which Endpoints reject, and nothing dials it); with a real node it
# advertises the node's address, so pods reach it as the `kubernetes` Service, and it talks to
# the kubelet (logs, exec) with a client certificate of its own.
apiserver_node_flags() {
  local pki=$STATE_DIR/pki
  if [ "$NODE_KIND" = kwok ]; then
    echo --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --endpoint-reconciler-type none \
      --enable-admission-plugins OwnerReferencesPermissionEnforcement
    return
  fi
  echo --bind-address 0.0.0.0 --advertise-address "$NODE_IP" \
    --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types InternalIP \
    --enable-admission-plugins OwnerReferencesPermissionEnforcement,NodeRestriction
}

start_control_plane() {
  local pki=$STATE_DIR/pki
  start etcd --name mlkube-local --data-dir "$STATE_DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "mlkube-local=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync --quota-backend-bytes 8589934592 --log-level warn
  wait_until "etcd to serve" 30 etcd "in_cluster_net curl -fsS --max-time 1 http://127.0.0.1:$ETCD_CLIENT_PORT/health | grep -q true"

  # OwnerReferencesPermissionEnforcement, as hardened clusters run it: blockOwnerDeletion needs
  # RBAC on the owner's finalizers, so the operator's cluster tests prove that rule too.
  # shellcheck disable=SC2046
  start kube-apiserver \
    --etcd-servers "http://127.0.0.1:$ETCD_CLIENT_PORT" --secure-port "$API_PORT" \
    $(apiserver_node_flags) \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --service-cluster-ip-range 10.0.0.0/24 \
    --authorization-mode Node,RBAC --allow-privileged=true \
    --max-requests-inflight 1000 --max-mutating-requests-inflight 500 \
    --profiling=false
  wait_until "kube-apiserver /readyz" 90 kube-apiserver api_ready

  start kube-controller-manager \
    --kubeconfig "$KUBECONFIG_FILE" \
    --authentication-kubeconfig "$KUBECONFIG_FILE" --authorization-kubeconfig "$KUBECONFIG_FILE" \
    --bind-address 127.0.0.1 --secure-port "$CONTROLLER_MANAGER_PORT" \
    --leader-elect=false \
    --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
    --kube-api-qps 500 --kube-api-burst 1000 \
    --concurrent-deployment-syncs 10 --concurrent-replicaset-syncs 10 --concurrent-gc-syncs 40 \
    --profiling=false

  cat >"$STATE_DIR/scheduler.yaml" <<SCHEDULER
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $KUBECONFIG_FILE
  qps: 500
  burst: 1000
leaderElection:
  leaderElect: false
# No default topology spread: with it, each pod a Service selects is scored against every pod in
# the cluster, 33 ms a pod at 6,000 pods on these 2 cores, and the bench's 40,000 queue for hours.
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: PodTopologySpread
    args:
      defaultingType: List
      defaultConstraints: []
SCHEDULER
  start kube-scheduler --config "$STATE_DIR/scheduler.yaml" \
    --authentication-kubeconfig "$KUBECONFIG_FILE" --authorization-kubeconfig "$KUBECONFIG_FILE" \
    --bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT" --profiling=false

}

start_kwok_nodes() {
  start kwok --kubeconfig "$KUBECONFIG_FILE" --config "$KWOK_STAGES" \
    --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
    --server-address "127.0.0.1:$KWOK_PORT" \
    --cidr 10.240.0.0/12 --node-ip 127.0.240.1 \
    --node-lease-duration-seconds 40

  {
    for ((i = 0; i < NODES; i++)); do node_manifest "kwok-node-$i" 0; echo "---"; done
    node_manifest kwok-gpu-node-0 8
  } |
    kubectl_local apply -f - >"$STATE_DIR/nodes.log" 2>&1 ||
    die "creating the kwok nodes failed; see $STATE_DIR/nodes.log"
  wait_until "the $((NODES + 1)) kwok nodes to be Ready" 60 kwok nodes_ready
}

down() {
  if [ "$NODE_KIND" = real ]; then
    down_real
  else
    stop_operator
    stop_components kwok kube-scheduler kube-controller-manager kube-apiserver etcd
  fi
  rm -rf "$STATE_DIR"
  say "down"
}

env_line() {
  echo "export KUBECONFIG=$KUBECONFIG_FILE"
  echo "case \":\$PATH:\" in *\":$STATE_DIR/bin:\"*) ;; *) export PATH=\"$STATE_DIR/bin:\$PATH\" ;; esac"
  # A real node's gateway (the gateway component with serviceType NodePort, nodePort 30080).
  [ "$NODE_KIND" = kwok ] || echo "export MLKUBE_GATEWAY_URL=http://127.0.0.1:$GATEWAY_PORT"
}

# ---------------------------------------------------------------------------------------------
# the operator beside the cluster

OPERATOR_KUBECONFIG=$STATE_DIR/operator.kubeconfig

operator_ready() { curl -fsS --max-time 2 "http://127.0.0.1:$OPERATOR_HEALTH_PORT/readyz" >/dev/null; }

# A kubeconfig of the operator's own: the ServiceAccount's token from the TokenRequest API, so the
# operator has exactly the rights its component grants the Deployment, nothing of the admin's.
write_operator_kubeconfig() {
  local namespace=$1 account=$2 token
  token=$(kubectl_local create token "$account" --namespace "$namespace" --duration 720h) ||
    die "could not get a token for the ServiceAccount $namespace/$account" \
      "deploy the tf-job-operator component first (cluster/quickstart.sh does), then run this again"
  write_kubeconfig "$OPERATOR_KUBECONFIG" "system:serviceaccount:$namespace:$account" "$namespace" \
    "    token: $token"
}

# (Re)start `mlkube operator` as a ServiceAccount of the cluster. A second call replaces the
# running operator (with a fresh token and whatever mlkube is on PATH now), so it is harmless.
start_operator() {
  [ $# -ge 2 ] || die "usage: $0 operator NAMESPACE SERVICEACCOUNT [OPERATOR ARGS...]"
  local namespace=$1 account=$2 mlkube=${MLKUBE_BIN:-}
  shift 2
  [ -n "$mlkube" ] || mlkube=$(command -v mlkube) ||
    die "mlkube is not on PATH" "install it with: cargo install --locked --path ." "or name the binary in MLKUBE_BIN"
  { all_running && api_ready; } || die "the local cluster is not up" "start it with: $0 up"
  stop_operator
  write_operator_kubeconfig "$namespace" "$account"
  POD_NAMESPACE=$namespace setsid "$mlkube" operator "$@" --kubeconfig "$OPERATOR_KUBECONFIG" \
    --metrics-addr "127.0.0.1:$OPERATOR_METRICS_PORT" --health-addr "127.0.0.1:$OPERATOR_HEALTH_PORT" \
    >>"$STATE_DIR/operator.log" 2>&1 </dev/null &
  echo $! >"$STATE_DIR/operator.pid"
  wait_until "the operator's /readyz" 60 operator operator_ready
  say "mlkube operator runs as $namespace/$account (pid $(pid_of operator)); log: $STATE_DIR/operator.log"
}

# SIGTERM first, so the operator finishes its reconciles in flight and hands back its lease.
stop_operator() {
  local pid deadline
  pid=$(pid_of operator)
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$((SECONDS + 30))
  while is_running operator && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
  if is_running operator; then kill -KILL "$pid" 2>/dev/null || true; fi
  while is_running operator; do sleep 0.1; done
  rm -f "$STATE_DIR/operator.pid"
}

# The operator's Deployments in the cluster (the tf-job-operator component's, by its name label),
# one line each: `namespace/name|ready|replicas`; nothing when the API server is not ready.
operator_deployments() {
  [ -f "$KUBECONFIG_FILE" ] && api_ready || return 0
  kubectl_local get deployments --all-namespaces -l app.kubernetes.io/name=tf-job-operator \
    -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name}|{.status.readyReplicas}|{.spec.replicas}{"\n"}{end}' \
    2>/dev/null || true
}

# The operator beside the cluster (`operator` starts it), and the operator in the cluster (the
# component's Deployment: it runs on a real node; kwok's pods run no container, so there only the
# one beside runs jobs). Fails when the one beside has exited.
operator_status() {
  local name ready replicas found=0 exited=0
  if is_running operator; then
    found=1
    printf '%-24s running (pid %s) beside the cluster, as %s, /readyz %s\n' "mlkube operator" \
      "$(pid_of operator)" \
      "$(sed -n 's/^- name: system:serviceaccount:/ServiceAccount /p' "$OPERATOR_KUBECONFIG")" \
      "$(operator_ready && echo ready || echo "not ready")"
  elif [ -f "$STATE_DIR/operator.pid" ]; then
    printf '%-24s exited; see %s\n' "mlkube operator" "$STATE_DIR/operator.log"
    found=1 exited=1
  fi
  while IFS='|' read -r name ready replicas; do
    [ -n "$name" ] || continue
    if [ "$NODE_KIND" = real ]; then
      found=1
      printf '%-24s running in the cluster: Deployment %s, %s/%s ready\n' "mlkube operator" \
        "$name" "${ready:-0}" "${replicas:-0}"
    else
      printf '%-24s Deployment %s is in the cluster, but %s\n' "mlkube operator" "$name" \
        "kwok runs no container: only an operator beside the cluster runs jobs"
    fi
  done < <(operator_deployments)
  [ "$found" = 1 ] || printf '%-24s not started (cluster/quickstart.sh starts it)\n' "mlkube operator"
  return "$exited"
}

status() {
  local c healthy=0
  echo "node kind                $NODE_KIND$([ "$NODE_KIND" = kwok ] || echo ", network namespace $NETNS")"
  for c in "${COMPONENTS[@]}"; do
    if is_running "$c"; then
      printf '%-24s running (pid %s)\n' "$c" "$(pid_of "$c")"
    else
      printf '%-24s not running\n' "$c"
      healthy=1
    fi
  done
  operator_status || healthy=1
  if [ -f "$KUBECONFIG_FILE" ] && api_ready; then
    echo "api server               ready at https://127.0.0.1:$API_PORT"
    kubectl_local get nodes
  else
    echo "api server               not ready"
    healthy=1
  fi
  return $healthy
}

case "${1:-}" in
  build) build ;;
  build-node)
    build_coredns
    build_local_path_provisioner
    ;;
  node-tools) require_real_node_host ;;
  preload)
    shift
    preload_images "$@"
    ;;
  up) up ;;
  node-kind)
    # The kind of node of the cluster in the state dir; with --running, fail when there is none.
    if [ "${2:-}" = --running ] && [ ! -f "$STATE_DIR/node-kind" ]; then exit 1; fi
    echo "$NODE_KIND"
    ;;
  leftovers)
    # What a `down` of a real-node cluster left behind: nothing, or one line each.
    found=$(leftovers_real)
    [ -z "$found" ] || { echo "$found"; exit 1; }
    ;;
  down) down ;;
  env) env_line ;;
  status) status ;;
  operator)
    shift
    start_operator "$@"
    ;;
  *)
    echo "usage: $0 build|build-node|node-tools|preload [IMAGE...]|up|down|env|status|node-kind|leftovers|operator NAMESPACE SERVICEACCOUNT [ARGS...]" >&2
    exit 2
    ;;
esac
