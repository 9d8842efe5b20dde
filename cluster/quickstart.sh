#!/usr/bin/env bash
# The main job on a fresh machine: install `mlkube` on PATH (a release build), start the local
# control plane, create the default app, deploy its `local` environment to the cluster (waiting
# until it is healthy), and run `mlkube operator` beside the cluster as the tf-job-operator
# component's ServiceAccount, since kwok's simulated nodes run no containers. Running it again
# is harmless: the build is incremental, the cluster and the app are reused, the apply changes
# nothing, and the operator is restarted with a fresh token.
#
#   cluster/quickstart.sh [APP_DIR]     (default: $TMPDIR/mlkube-quickstart)
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/mlkube/target}
app=${1:-${TMPDIR:-/tmp}/mlkube-quickstart}

say() { printf 'quickstart: %s\n' "$*" >&2; }

say "installing mlkube (cargo install --locked --path .; a release build, some minutes the first time)"
cargo install --quiet --locked --path . --force
installed=${CARGO_INSTALL_ROOT:-${CARGO_HOME:-$HOME/.cargo}}/bin/mlkube
if [ "$(command -v mlkube)" != "$installed" ]; then
  say "warning: $(dirname "$installed") is not first on PATH, so \`mlkube\` is not the one just installed"
  say "  hint: add it to PATH, e.g. in ~/.profile: export PATH=\"$(dirname "$installed"):\$PATH\""
fi

cluster/local-cluster.sh up
eval "$(cluster/local-cluster.sh env)"

if [ ! -f "$app/app.yaml" ]; then
  "$installed" init "$app"
fi
"$installed" --app "$app" apply local
"$installed" --app "$app" diff local

# The operator runs with the namespace, ServiceAccount and arguments of the Deployment that the
# component rendered; only its listeners move to the cluster's own loopback ports.
deployment='app.kubernetes.io/name=tf-job-operator'
read -r namespace account < <(kubectl get deployments --all-namespaces -l "$deployment" \
  -o jsonpath='{.items[0].metadata.namespace} {.items[0].spec.template.spec.serviceAccountName}{"\n"}')
mapfile -t args < <(kubectl get deployments --namespace "$namespace" -l "$deployment" \
  -o jsonpath='{range .items[0].spec.template.spec.containers[0].args[*]}{@}{"\n"}{end}')
operator_args=()
for ((i = 1; i < ${#args[@]}; i++)); do # args[0] is the verb, `operator`
  case "${args[i]}" in
    --metrics-addr | --health-addr) i=$((i + 1)) ;;
    *) operator_args+=("${args[i]}") ;;
  esac
done
MLKUBE_BIN=$installed cluster/local-cluster.sh operator "$namespace" "$account" "${operator_args[@]}"

cat <<NEXT

mlkube is installed as $installed.
The default app is in $app; its local environment runs on the local control plane, and the
TFJob operator runs beside it (cluster/local-cluster.sh status shows it).
Next:
  eval "\$(cluster/local-cluster.sh env)"     # KUBECONFIG, and kubectl on PATH
  kubectl apply -f examples/dist-mnist.yaml
  kubectl get tfjobs --watch                  # Created, Running, then Succeeded
  cd $app && mlkube show prod
  cluster/local-cluster.sh down               # stops the cluster and the operator
NEXT
