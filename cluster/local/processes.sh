# shellcheck shell=bash
# The cluster's processes: started with a log and a pid file, waited for, stopped; its ports and
# the checks of readiness that `up` and `status` share. Sourced by cluster/local-cluster.sh.

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
