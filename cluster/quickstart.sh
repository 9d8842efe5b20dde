#!/usr/bin/env bash
# The main job on a fresh machine: install `mlkube` on PATH (a release build), start the local
# cluster, create the default app, deploy its `local` environment (waiting until it is healthy),
# and train.
#
# As root it starts two real nodes (MLKUBE_CLUSTER_NODE=real: each containerd, a kubelet and
# flannel in a network namespace of its own, pulling from the cluster's registry), where the
# operator runs in the cluster from its image and a TFJob of two workers really trains on the
# training image; the last lines are its logs, tagged by replica, with the test accuracy.
# Otherwise (or with MLKUBE_CLUSTER_NODE=kwok) the nodes are kwok's simulated ones, which run no
# container: the operator then runs beside the cluster as the component's ServiceAccount, and
# jobs "run" for 5 seconds.
#
# Running it again is harmless: the builds are incremental, the cluster and the app are reused,
# the apply changes nothing, and a job that saved its model version is kept (a version is
# written once).
#
#   cluster/quickstart.sh [APP_DIR]     (default: $TMPDIR/mlkube-quickstart)
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/mlkube/target}
app=${1:-${TMPDIR:-/tmp}/mlkube-quickstart}
# The images the real nodes pull (image/node-images.sh builds them, `up` pushes them to the
# cluster's registry).
IMAGE_TAG=0.1.0

say() { printf 'quickstart: %s\n' "$*" >&2; }

default_node_kind() {
  if [ "$(id -u)" -eq 0 ]; then
    echo real
  else
    say "not root: the nodes will be kwok's simulated ones (a real node needs root for its network namespace, cgroups and mounts)"
    echo kwok
  fi
}
MLKUBE_CLUSTER_NODE=${MLKUBE_CLUSTER_NODE:-$(cluster/local-cluster.sh node-kind --running 2>/dev/null || default_node_kind)}
export MLKUBE_CLUSTER_NODE

installed=${CARGO_INSTALL_ROOT:-${CARGO_HOME:-$HOME/.cargo}}/bin/mlkube
# shellcheck source=SCRIPTDIR/../image/progress.sh
source image/progress.sh # a line a minute while the build runs
# Real nodes run the operator from its image, whose static binary (musl, no C library needed)
# runs on this machine too: one release build serves both. Simulated nodes need no image.
install_mlkube() {
  if [ "$MLKUBE_CLUSTER_NODE" = real ]; then
    cluster/local-cluster.sh node-tools # the Debian packages, musl-tools among them
    say "installing mlkube: the operator image's static binary (image/build.sh; a release build, some minutes the first time)"
    image/build.sh >/dev/null
    install -D -m 0755 "$CARGO_TARGET_DIR/static/x86_64-unknown-linux-musl/release/mlkube" "$installed"
  else
    say "installing mlkube (cargo install --locked --path .; a release build, some minutes the first time)"
    with_progress "cargo install" cargo install --quiet --locked --path . --force
  fi
}
install_mlkube
if [ "$(command -v mlkube)" != "$installed" ]; then
  say "warning: $(dirname "$installed") is not first on PATH, so \`mlkube\` is not the one just installed"
  say "  hint: add it to PATH, e.g. in ~/.profile: export PATH=\"$(dirname "$installed"):\$PATH\""
fi
mlkube() { "$installed" --app "$app" "$@"; }

cluster/local-cluster.sh up >/dev/null
eval "$(cluster/local-cluster.sh env)"

if [ ! -f "$app/app.yaml" ]; then
  # init's stderr is a pipe here, so it leaves the next steps to the block this script ends with.
  "$installed" init "$app" 2>&1 >/dev/null | sed 's/^/quickstart: /' >&2
fi
# The operator's component: `training-operator`, or `tf-job-operator` where an older mlkube made
# the app (the name is its objects', so it stays).
operator=$(mlkube component list -o name | grep -x -e training-operator -e tf-job-operator)

# ---------------------------------------------------------------------------------------------
# kwok: the operator beside the cluster, with the arguments of the Deployment the component renders

run_operator_beside_the_cluster() {
  local deployment='app.kubernetes.io/name=tf-job-operator' namespace account i container_args operator_args=()
  read -r namespace account < <(kubectl get deployments --all-namespaces -l "$deployment" \
    -o jsonpath='{.items[0].metadata.namespace} {.items[0].spec.template.spec.serviceAccountName}{"\n"}')
  mapfile -t container_args < <(kubectl get deployments --namespace "$namespace" -l "$deployment" \
    -o jsonpath='{range .items[0].spec.template.spec.containers[0].args[*]}{@}{"\n"}{end}')
  for ((i = 1; i < ${#container_args[@]}; i++)); do # container_args[0] is the verb, `operator`
    case "${container_args[i]}" in
      --metrics-addr | --health-addr) i=$((i + 1)) ;;
      *) operator_args+=("${container_args[i]}") ;;
    esac
  done
  MLKUBE_BIN=$installed cluster/local-cluster.sh operator "$namespace" "$account" "${operator_args[@]}"
}

if [ "$MLKUBE_CLUSTER_NODE" = kwok ]; then
  # The object store keeps its data on a volume, and kwok's nodes have no provisioner; nor do
  # they run the gateway or a model server, so the operator serves no InferenceService here.
  mlkube param set "$operator" servingGateway null --env local >/dev/null
  mlkube apply local -c notebook-hub -c "$operator" -c volume-controller
  run_operator_beside_the_cluster
  cat <<NEXT

mlkube is installed as $installed. The default app is in $app; its local environment runs on
the local control plane (simulated nodes), and the TFJob operator beside it.
Next:
  eval "\$(cluster/local-cluster.sh env)"     # KUBECONFIG, and kubectl on PATH
  kubectl apply -f examples/dist-mnist.yaml
  kubectl get tfjobs --watch                  # Created, Running, then Succeeded (5 s of nothing)
  cluster/local-cluster.sh down               # stops the cluster and the operator
NEXT
  exit 0
fi

# ---------------------------------------------------------------------------------------------
# a real node: the platform from local images, then a job that really trains

# The hub and its notebooks run the notebook-hub image the node holds.
mlkube param set notebook-hub image mlkube/notebook-hub --env local >/dev/null
mlkube param set notebook-hub tag "$IMAGE_TAG" --env local >/dev/null
mlkube param set notebook-hub proxyImage "mlkube/notebook-hub:$IMAGE_TAG" --env local >/dev/null
mlkube param set notebook-hub notebookImages "[\"mlkube/notebook-hub:$IMAGE_TAG\"]" --env local >/dev/null
# PyTorch workers' init container: BIND's nslookup in an image the node holds (upstream's
# alpine:3.10 comes from a registry the node cannot reach).
mlkube param set "$operator" pytorchInitImage "mlkube/dnsutils:$IMAGE_TAG" --env local >/dev/null
# The operator also serves KServe's InferenceServices, routed on the gateway component's Gateway.
mlkube param set "$operator" servingGateway gateway --env local >/dev/null
# mnist serves the TFJob's SavedModel from the store as KServe's InferenceService mnist, with
# MLServer from the serving image the nodes pull. An app made by an older quickstart served it
# with the serving prototype: that component is replaced.
if mlkube component list | awk '$1 == "mnist" { print $2 }' | grep -qx -e serving -e tf-serving; then
  mlkube delete local -c mnist --yes >/dev/null
  mlkube component rm mnist >/dev/null
fi
if ! mlkube component list -o name | grep -qx mnist; then
  mlkube component add inference-service mnist --param modelFormat=tensorflow \
    --param 'storageUri=s3://models/tf-digits/{version}/' >/dev/null
fi
mlkube param set mnist args '["--version", "v1"]' >/dev/null # its answers name the version
if ! mlkube component list -o name | grep -qx gateway; then # an app made by an older mlkube
  mlkube component add gateway gateway >/dev/null
  mlkube param set gateway serviceType NodePort --env local >/dev/null
  mlkube param set gateway nodePort 30080 --env local >/dev/null
fi
say "applying the operator and the volume controller (from the operator's image), the notebook hub,"
say "the object store and the gateway (Traefik, whose HTTPRoutes the operator's InferenceServices use)"
mlkube apply local -c "$operator" -c volume-controller -c notebook-hub -c object-store -c gateway

# The data, the job and the store live in the environment's namespace.
namespace=$(mlkube env list | awk '$1 == "local" { print $2 }')
say "the data: the training image's digits into the object store (examples/digits-upload.yaml),"
say "then onto the node by the volume controller (examples/digits-data.yaml)"
kubectl -n "$namespace" delete -f examples/digits-upload.yaml -f examples/digits-data.yaml --ignore-not-found --wait >/dev/null
kubectl -n "$namespace" apply -f examples/digits-upload.yaml >/dev/null
kubectl -n "$namespace" wait --for=condition=Complete job/digits-upload --timeout=5m >/dev/null
kubectl -n "$namespace" logs job/digits-upload >&2
placing=$(date +%s)
kubectl -n "$namespace" apply -f examples/digits-data.yaml >/dev/null
kubectl -n "$namespace" wait --for=jsonpath='{.status.state}'=Completed volumemanager/digits-data --timeout=5m >/dev/null
say "placed on $(kubectl -n "$namespace" get volumemanager digits-data -o jsonpath='{.status.volumes[0].nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0].values[0]}') in $(($(date +%s) - placing)) s"

# Runs the job component COMPONENT (the object KIND/COMPONENT) afresh, unless it has succeeded
# as the app renders it now: a model version is written once, so its run again would be refused.
# Fails (status 1) when it keeps the job.
run_afresh() {
  local component=$1 object=$2
  if [ "$(ended "$object")" = Succeeded ] && mlkube diff local -c "$component" >/dev/null 2>&1; then
    say "kept $object: it saved its model version before (a version is written once)"
    return 1
  fi
  mlkube delete local -c "$component" --yes >/dev/null
  mlkube apply local -c "$component" --no-wait >/dev/null
}

# How the job KIND/NAME ended, Succeeded or Failed; nothing while it runs, or when it is not there.
ended() {
  kubectl -n "$namespace" get "$1" --ignore-not-found \
    -o jsonpath='{.status.conditions[?(@.status=="True")].type}' | grep -owE 'Succeeded|Failed'
}

# Waits, up to 10 minutes, until each job KIND/NAME has Succeeded; a job that failed ends the
# quickstart at once, with its Failed condition's message (`kubectl wait` would wait out its
# timeout).
wait_succeeded() {
  local object end deadline=$((SECONDS + 600))
  for object in "$@"; do
    until end=$(ended "$object"); do
      if [ "$SECONDS" -ge "$deadline" ]; then
        say "error: $object has not finished in 10 minutes"
        say "  hint: see what it waits for: mlkube logs -n $namespace $object"
        exit 1
      fi
      sleep 2
    done
    if [ "$end" = Failed ]; then
      say "error: $object failed: $(kubectl -n "$namespace" get "$object" \
        -o jsonpath='{.status.conditions[?(@.type=="Failed")].message}')"
      say "  hint: its logs: mlkube logs -n $namespace $object"
      exit 1
    fi
  done
}

# The job: the tf-job prototype's component, reading the placed data and saving its model.
job=tf-digits
if ! mlkube component list -o name | grep -qx "$job"; then
  mlkube component add tf-job "$job" --param image="mlkube/training:$IMAGE_TAG" \
    --param 'command=["python3", "/opt/mlkube/examples/tf_digits.py"]' \
    --param 'args=["--data=/data/digits"]' --param workerReplicas=2 \
    --param objectStore=object-store --param dataVolumeManager=digits-data >/dev/null
fi
# Version v1 of the model mnist serves (an app made by an older quickstart saved it as 1).
mlkube param set "$job" modelPath models/tf-digits/v1 >/dev/null
say "training: TFJob $job (2 workers, MultiWorkerMirroredStrategy) on the placed digits; worker 0"
say "saves its SavedModel to s3://models/tf-digits/v1/"
if run_afresh "$job" "tfjob/$job"; then
  mlkube logs -n "$namespace" --follow "tfjob/$job" | grep --line-buffered -E 'epoch|accuracy|model saved' || true
fi
wait_succeeded "tfjob/$job"

say "the models in the store (examples/models-list.yaml):"
kubectl -n "$namespace" delete -f examples/models-list.yaml --ignore-not-found --wait >/dev/null
kubectl -n "$namespace" apply -f examples/models-list.yaml >/dev/null
kubectl -n "$namespace" wait --for=condition=Complete job/models-list --timeout=5m >/dev/null
kubectl -n "$namespace" logs job/models-list

# An XGBoostJob component COMPONENT saving the digits model as s3://models/xgboost-digits/VERSION/,
# trained with the script's ARGS (a JSON list), made once and run afresh unless it succeeded.
train_version() {
  local component=$1 version=$2 args=$3
  if ! mlkube component list -o name | grep -qx "$component"; then
    mlkube component add xgboost-job "$component" --param image="mlkube/training:$IMAGE_TAG" \
      --param 'command=["python3", "/opt/mlkube/examples/xgboost_digits.py"]' \
      --param "args=$args" --param objectStore=object-store \
      --param "modelPath=models/xgboost-digits/$version" >/dev/null
  fi
  run_afresh "$component" "xgboostjob/$component" || true
}

# One digit's 64 pixels (0-16), as the XGBoost models take them; the TensorFlow model takes them
# divided by 16.
digit=(0 0 5 13 9 1 0 0 0 0 13 15 10 15 5 0 0 3 15 2 0 11 8 0 0 4 12 0 0 8 8 0 0 5 8 0 0 9 8 0 0 4 11 0 1 12 7 0 0 2 14 5 10 12 0 0 0 0 6 13 10 0 0 0)
# A V2 infer request of that digit, its pixels divided by DIVISOR.
digit_request() {
  local pixels
  pixels=$(printf '%s\n' "${digit[@]}" | awk -v d="$1" '{ printf "%s%g", (NR > 1 ? "," : ""), $1 / d }')
  printf '{"inputs": [{"name": "pixels", "shape": [1, 64], "datatype": "FP32", "data": [%s]}]}' "$pixels"
}

# N predictions of MODEL through the gateway (with the Host header HOST, or none), from DIVISOR's
# request: the versions that answered, counted.
predictions() {
  local n=$1 model=$2 host=$3 request
  request=$(digit_request "$4")
  for _ in $(seq "$n"); do
    curl -sf "$MLKUBE_GATEWAY_URL/v2/models/$model/infer" ${host:+-H "Host: $host"} \
      -H 'content-type: application/json' -d "$request" |
      grep -o '"model_version":"[^"]*"' || echo failed
  done | sort | uniq -c | sed 's/^/quickstart:   /' >&2
}

say "serving the TFJob's model: KServe's InferenceService mnist (MLServer behind the gateway)"
mlkube apply local -c mnist >/dev/null
mnist_host=$(kubectl -n "$namespace" get inferenceservice mnist -o jsonpath='{.status.url}')
mnist_host=${mnist_host#http://}
say "20 predictions of mnist through $MLKUBE_GATEWAY_URL/v2/models/mnist/infer (Host: $mnist_host) answered by:"
predictions 20 mnist "$mnist_host" 16

say "serving, as the Kubeflow talk ends: two XGBoostJobs save v1 and v2 of a digits model; the"
say "operator serves them as KServe's InferenceService digits (MLServer behind the gateway): v1,"
say "then v2 as a canary at 10%, then v2 promoted"
train_version xgb-v1 v1 '[]'
train_version xgb-v2 v2 '["--rounds=80", "--max-depth=6", "--learning-rate=0.2"]'
wait_succeeded xgboostjob/xgb-v1 xgboostjob/xgb-v2
# An app made by an older quickstart served digits with the serving prototype.
if mlkube component list | awk '$1 == "digits" { print $2 }' | grep -qx serving; then
  mlkube delete local -c digits --yes >/dev/null
  mlkube component rm digits >/dev/null
fi
if ! mlkube component list -o name | grep -qx digits; then
  mlkube component add inference-service digits \
    --param 'storageUri=s3://models/xgboost-digits/{version}/' >/dev/null
fi
# Serve VERSION (named in the answers) with CANARY percent of the requests (null: all of them),
# and wait until the newest revision is ready.
serve_digits() {
  mlkube param set digits version "$1" >/dev/null
  mlkube param set digits args "[\"--version\", \"$1\"]" >/dev/null
  mlkube param set digits canaryTrafficPercent "$2" >/dev/null
  mlkube apply local -c digits >/dev/null
}
serve_digits v1 null
host=$(kubectl -n "$namespace" get inferenceservice digits -o jsonpath='{.status.url}')
host=${host#http://}
say "v1, 100 predictions through $MLKUBE_GATEWAY_URL (Host: $host) answered by:"
predictions 100 digits "$host" 1
serve_digits v2 10
say "v2 at canaryTrafficPercent 10 (its revision ready before it got requests), 200 predictions answered by:"
predictions 200 digits "$host" 1
serve_digits v2 null
say "v2 promoted (canaryTrafficPercent null; v1's revision goes 5 s later), 100 predictions answered by:"
predictions 100 digits "$host" 1
mlkube status local | sed -n '/^SERVING/,$p' | grep -v ' members: ' >&2 || true

cat <<NEXT

mlkube is installed as $installed. The default app is in $app; its local environment runs on
the local cluster's real nodes: the operator from its image, the notebook hub (each user's
notebook on a volume of their own) and the object store (S3, buckets data and models).
TFJob $job trained on it from the digits the volume controller placed, and saved its model in
the store, which KServe's InferenceService mnist serves with MLServer behind the gateway
($MLKUBE_GATEWAY_URL); its workers' logs, tagged by replica, and the store's models are above.
Two XGBoostJobs saved v1 and v2 of another digits model, which the InferenceService digits
serves and rolled from v1 to v2 by a canary (the operator's controller); what answered is above.
Next:
  eval "\$(cluster/local-cluster.sh env)"     # KUBECONFIG, and kubectl on PATH
  mlkube logs -n $namespace tfjob/$job --replica worker-0   # one replica's log
  kubectl apply -f examples/jax-digits.yaml   # JAX, and examples/xgboost-digits.yaml
  mlkube --app $app status local                # the members, and the served versions
  curl -s -H 'Host: $host' \$MLKUBE_GATEWAY_URL/v2/models/digits  # its metadata, by KServe's host
  cluster/local-cluster.sh down               # stops everything; the caches stay (it says how large, and how to free them)
NEXT
