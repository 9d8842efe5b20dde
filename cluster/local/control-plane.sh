# shellcheck shell=bash
# etcd, the API server, the controller-manager and the scheduler, started in order, with the
# flags that depend on the kind of node. Sourced by cluster/local-cluster.sh.

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

# With real nodes, the controller-manager gives each Node a pod CIDR, which flannel reads. A node
# whose kubelet has not renewed its lease for 20 s is NotReady, not 50 s as by default: the
# kubelets renew every 5 s (nodeLeaseDurationSeconds: 20), and a lost node's pods move on sooner.
controller_manager_node_flags() {
  [ "$NODE_KIND" = kwok ] ||
    echo --allocate-node-cidrs=true --cluster-cidr "$CLUSTER_CIDR" --node-cidr-mask-size 24 \
      --node-monitor-grace-period 20s
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

  # shellcheck disable=SC2046
  start kube-controller-manager \
    --kubeconfig "$KUBECONFIG_FILE" \
    --authentication-kubeconfig "$KUBECONFIG_FILE" --authorization-kubeconfig "$KUBECONFIG_FILE" \
    --bind-address 127.0.0.1 --secure-port "$CONTROLLER_MANAGER_PORT" \
    --leader-elect=false \
    --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
    --kube-api-qps 500 --kube-api-burst 1000 \
    --concurrent-deployment-syncs 10 --concurrent-replicaset-syncs 10 --concurrent-gc-syncs 40 \
    $(controller_manager_node_flags) --profiling=false

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
