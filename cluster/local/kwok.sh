# shellcheck shell=bash
# kwok's simulated nodes: their manifests, kwok started to manage them, and their readiness.
# Sourced by cluster/local-cluster.sh.

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
