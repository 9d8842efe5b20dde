# shellcheck shell=bash
# `mlkube operator` beside the cluster, as a ServiceAccount of it, and what `status` says of it
# and of the operator Deployed in the cluster. Sourced by cluster/local-cluster.sh.

OPERATOR_KUBECONFIG=$STATE_DIR/operator.kubeconfig

operator_ready() { curl -fsS --max-time 2 "http://127.0.0.1:$OPERATOR_HEALTH_PORT/readyz" >/dev/null; }

# A kubeconfig of the operator's own: the ServiceAccount's token from the TokenRequest API, so the
# operator has exactly the rights its component grants the Deployment, nothing of the admin's.
write_operator_kubeconfig() {
  local namespace=$1 account=$2 token
  token=$(kubectl_local create token "$account" --namespace "$namespace" --duration 720h) ||
    die "could not get a token for the ServiceAccount $namespace/$account" \
      "deploy the operator's component first (training-operator, or tf-job-operator in an app an older mlkube made; cluster/quickstart.sh does), then run this again"
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

# The operator's Deployments in the cluster (a training-operator component's, by its name label,
# which keeps the prototype's first name, tf-job-operator), one line each:
# `namespace/name|ready|replicas`; nothing when the API server is not ready.
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
