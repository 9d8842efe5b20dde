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
#   real            real nodes (MLKUBE_CLUSTER_NODES, default 2: containerd, kubelet,
#                   kube-proxy, flannel) where containers run, each in a network namespace of
#                   its own, pulling from the cluster's registry: see cluster/real-node.sh
#
#   cluster/local-cluster.sh build    build (once) the binaries into the cache
#   cluster/local-cluster.sh build-node  build (once) what only real nodes run: CoreDNS, flannel,
#                                     kube-router, local-path-provisioner and the registry
#                                     (run-tests.sh builds them ahead)
#   cluster/local-cluster.sh node-tools  install (root, apt-get) what a real node and its images
#                                     need, if missing (run-tests.sh does it ahead)
#   cluster/local-cluster.sh preload [IMAGE...]  build the real nodes' images (the names
#                                     image/node-images.sh takes, or all), push them into the
#                                     registry's kept storage and pull them into every node's
#                                     kept store while no real node runs (run-tests.sh does it
#                                     ahead, so that the nodes' up has little left to do)
#   cluster/local-cluster.sh up       build if needed, start, wait for /readyz and Ready nodes
#   cluster/local-cluster.sh down     stop everything (the operator too), remove the state dir
#   cluster/local-cluster.sh env      print `export KUBECONFIG=...` and put kubectl on PATH
#   cluster/local-cluster.sh status   say what runs and whether the API server is ready
#   cluster/local-cluster.sh node-kind [--running]
#                                     kwok or real: the cluster's, else what `up` would start
#   cluster/local-cluster.sh stop-node K  real node K (2, 3, ...) fails: every process of it killed
#   cluster/local-cluster.sh start-node K  real node K back, as after a reboot
#   cluster/local-cluster.sh leftovers  list what a real node's `down` left (processes, mounts,
#                                     cgroups, the namespace, the state directory with the nodes'
#                                     data); exit 1 if anything
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
#
# This file holds the settings, `up`, `down`, `env`, `status` and the verbs; its parts, one
# concern each, are under cluster/local/: build.sh (the Go builds), pki.sh (certificates and
# kubeconfigs), processes.sh (starting, waiting for and stopping the cluster's processes),
# control-plane.sh, kwok.sh (the simulated nodes) and operator.sh (`mlkube operator` beside the
# cluster); a real node's are cluster/real-node.sh and cluster/node/.
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
# shellcheck source=SCRIPTDIR/../image/progress.sh
. "$REPO_DIR/image/progress.sh" # with_progress: a line a minute while a build runs

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
if [ "$NODE_KIND" = real ]; then
  read -ra COMPONENTS <<<"$(real_components | tr '\n' ' ')"
else
  COMPONENTS=("${KWOK_COMPONENTS[@]}")
fi

# shellcheck source=SCRIPTDIR/../image/go.sh
. "$REPO_DIR/image/go.sh"
# shellcheck source=SCRIPTDIR/local/build.sh
. "$REPO_DIR/cluster/local/build.sh"
# shellcheck source=SCRIPTDIR/local/pki.sh
. "$REPO_DIR/cluster/local/pki.sh"
# shellcheck source=SCRIPTDIR/local/processes.sh
. "$REPO_DIR/cluster/local/processes.sh"
# shellcheck source=SCRIPTDIR/local/control-plane.sh
. "$REPO_DIR/cluster/local/control-plane.sh"
# shellcheck source=SCRIPTDIR/local/kwok.sh
. "$REPO_DIR/cluster/local/kwok.sh"
# shellcheck source=SCRIPTDIR/local/operator.sh
. "$REPO_DIR/cluster/local/operator.sh"

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
  [ "$NODE_KIND" = kwok ] || { require_real_node_host && check_node_count; }
  check_ports_free
  build
  [ "$NODE_KIND" = kwok ] || build_node
  local started=$SECONDS
  mkdir -p "$STATE_DIR/bin" "$NODE_DIR"
  echo "$NODE_KIND" >"$STATE_DIR/node-kind"
  # Only kubectl goes on the PATH that `env` prints, not the servers beside it.
  ln -sf "$BIN_DIR/kubectl" "$STATE_DIR/bin/kubectl"
  generate_pki
  if [ "$NODE_KIND" = real ]; then
    generate_cluster_node_pki
    create_namespaces
    start_forwarder
  fi
  start_control_plane
  if [ "$NODE_KIND" = real ]; then start_nodes; else start_kwok_nodes; fi
  # Pods need their namespace's default ServiceAccount, which the controller-manager creates.
  wait_until "the default ServiceAccount" 60 kube-controller-manager \
    "kubectl_local get serviceaccount default -n default"
  say "up in $((SECONDS - started))s with nodes: $(kubectl_local get nodes --no-headers | awk '{print $1}' | tr '\n' ' ')"
  env_line
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
  [ "$NODE_KIND" != real ] || say_kept_stores
}

# The environment of a cluster that is up; of one that is not, an error and nothing to eval.
env_line() {
  { [ -f "$KUBECONFIG_FILE" ] && is_running kube-apiserver; } ||
    die "no local cluster is up in $STATE_DIR (port $API_PORT), so there is no KUBECONFIG to use" \
      "start it: $0 up" "another cluster's: set MLKUBE_CLUSTER_DIR and MLKUBE_CLUSTER_PORT as for its up"
  echo "export KUBECONFIG=$KUBECONFIG_FILE"
  echo "case \":\$PATH:\" in *\":$STATE_DIR/bin:\"*) ;; *) export PATH=\"$STATE_DIR/bin:\$PATH\" ;; esac"
  # Real nodes' gateway (the gateway component with serviceType NodePort, nodePort 30080), and
  # the registry they pull from.
  [ "$NODE_KIND" = kwok ] || echo "export MLKUBE_GATEWAY_URL=http://127.0.0.1:$GATEWAY_PORT"
  [ "$NODE_KIND" = kwok ] || echo "export MLKUBE_REGISTRY=$REGISTRY_HOST"
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
  build-node) build_node ;;
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
  stop-node) stop_node "${2:-}" ;;
  start-node) start_node "${2:-}" ;;
  down) down ;;
  env) env_line ;;
  status) status ;;
  operator)
    shift
    start_operator "$@"
    ;;
  *)
    echo "usage: $0 build|build-node|node-tools|preload [IMAGE...]|up|down|env|status|node-kind|leftovers|stop-node K|start-node K|operator NAMESPACE SERVICEACCOUNT [ARGS...]" >&2
    exit 2
    ;;
esac
