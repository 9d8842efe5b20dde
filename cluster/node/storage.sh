# shellcheck shell=bash
# Volumes: local-path-provisioner, built from its module, and the default StorageClass.
# Sourced by cluster/real-node.sh.

# The helper pods' image: the busybox image/node-images.sh built (its tag is busybox's version).
helper_image() { awk '$1 ~ /\/busybox:/ {print $1; exit}' "$STATE_DIR/images.list"; }

# The provisioner's map of nodes to the directory their volumes live in: each node's state dir.
node_path_map() {
  local k entries=()
  for k in $(node_indexes); do
    entries+=("{\"node\": \"mlkube-node-$k\", \"paths\": [\"$STATE_DIR/node-$k/volumes\"]}")
  done
  local IFS=,
  echo "[${entries[*]}]"
}

# The provisioner's namespace, the ServiceAccount of its helper pods, its config (volumes under
# each node's state dir; the scripts the helper pods run; their pod, as root, since they make
# and remove directories in root's state dir) and the default StorageClass. A claim binds when
# its first pod is scheduled, as the provisioner needs the node.
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
    {"nodePathMap": $(node_path_map)}
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
        imagePullPolicy: IfNotPresent
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
  local k
  for k in $(node_indexes); do mkdir -p "$STATE_DIR/node-$k/volumes"; done
  storage_manifest "$helper" | kubectl_local apply -f - >"$STATE_DIR/storage.log" 2>&1 ||
    die "creating the StorageClass and the provisioner's config failed; see $STATE_DIR/storage.log"
  start_in_netns local-path-provisioner "$LOCAL_PATH_BIN" --debug start --kubeconfig "$KUBECONFIG_FILE" \
    --namespace "$LOCAL_PATH_NAMESPACE" --helper-image "$helper" --configmap-name local-path-config
}
