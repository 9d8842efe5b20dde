#!/usr/bin/env bash
# The main job on a fresh machine: start the local control plane, create the default app, and
# deploy its `local` environment to the cluster, waiting until it is healthy.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/mlkube/target}
app=${1:-${TMPDIR:-/tmp}/mlkube-quickstart}

cluster/local-cluster.sh up
eval "$(cluster/local-cluster.sh env)"

cargo build --quiet --bin mlkube
mlkube=$CARGO_TARGET_DIR/debug/mlkube

if [ ! -f "$app/app.yaml" ]; then
  "$mlkube" init "$app"
fi
"$mlkube" --app "$app" apply local
"$mlkube" --app "$app" diff local

cat <<NEXT

The default app is in $app and its local environment runs on the local control plane.
Next:
  eval "\$(cluster/local-cluster.sh env)"
  $mlkube --app $app show prod
  cluster/local-cluster.sh down
NEXT
