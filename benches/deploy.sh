#!/usr/bin/env bash
# Deploy speed, side by side: mlkube apply/diff against kubectl apply --server-side / kubectl diff
# --server-side on the same manifests, against the local control plane.
#
#   cluster/local-cluster.sh up && eval "$(cluster/local-cluster.sh env)"
#   benches/deploy.sh            # prints a Markdown table on stdout, progress on stderr
#
# Scenarios: a synthetic environment of N objects (ConfigMaps, Services, Deployments; N=500 by
# default) and, when `mlkube show` works, the default app's `local` environment. For each: the
# first apply (once, into a fresh namespace), then the no-op re-apply and the no-op diff (RUNS
# times each, median reported). mlkube applies with --no-wait, since kubectl apply does not wait.
#
# Settings (environment): MLKUBE (the binary; default: release build if present, else debug),
# KUBECTL (default: the one the local cluster script built), N, RUNS (default 5).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$HOME/.cache/mlkube/target}
if [ -z "${MLKUBE:-}" ]; then
  if [ -x "$target/release/mlkube" ]; then MLKUBE=$target/release/mlkube; else MLKUBE=$target/debug/mlkube; fi
fi
KUBECTL=${KUBECTL:-$HOME/.cache/mlkube/controlplane/k8s-v1.35.4-etcd-v3.6.5-kwok-v0.7.0/bin/kubectl}
N=${N:-500}
RUNS=${RUNS:-5}

die() { printf 'deploy bench: error: %s\n' "$*" >&2; exit 1; }
say() { printf 'deploy bench: %s\n' "$*" >&2; }
[ -x "$MLKUBE" ] || die "no mlkube binary at $MLKUBE; build it with 'cargo build --release' or set MLKUBE"
[ -x "$KUBECTL" ] || die "no kubectl at $KUBECTL; run cluster/local-cluster.sh build, or set KUBECTL"
[ -n "${KUBECONFIG:-}" ] || die "KUBECONFIG is not set; run: eval \"\$(cluster/local-cluster.sh env)\""
"$KUBECTL" get --raw /readyz >/dev/null 2>&1 || die "the cluster in $KUBECONFIG is not ready; run cluster/local-cluster.sh up"

work=$(mktemp -d)
namespaces=()
cleanup() {
  for ns in "${namespaces[@]}"; do "$KUBECTL" delete namespace "$ns" --wait=false >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# Seconds (3 decimals) that a command takes; its exit status must be one of the allowed ones.
time_it() {
  local allowed=$1
  shift
  local start end status
  start=$(date +%s.%N)
  set +e
  "$@" >"$work/out" 2>"$work/err"
  status=$?
  set -e
  end=$(date +%s.%N)
  case " $allowed " in
    *" $status "*) ;;
    *) say "command failed ($status): $*"; tail -n 20 "$work/err" >&2; exit 1 ;;
  esac
  echo "$end - $start" | bc -l | xargs printf '%.3f\n'
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

repeat() {
  local allowed=$1
  shift
  for _ in $(seq "$RUNS"); do time_it "$allowed" "$@"; done | median
}

# The synthetic environment: JSON documents are YAML documents, for both tools.
synthetic() {
  local ns=$1 n=$2
  python3 - "$ns" "$n" <<'EOF'
import json, sys
ns, n = sys.argv[1], int(sys.argv[2])
kinds = ["ConfigMap", "Service", "Deployment"]
for i in range(n):
    kind = kinds[i % 3]
    name = f"obj-{i:04d}"
    labels = {"app.kubernetes.io/managed-by": "bench", "mlkube.io/component": f"c{i % 10}"}
    meta = {"name": name, "namespace": ns, "labels": labels}
    if kind == "ConfigMap":
        obj = {"apiVersion": "v1", "kind": kind, "metadata": meta,
               "data": {"index": str(i), "settings.yaml": "replicas: 1\nlevel: info\n"}}
    elif kind == "Service":
        obj = {"apiVersion": "v1", "kind": kind, "metadata": meta,
               "spec": {"clusterIP": "None", "selector": {"app": name}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}
    else:
        obj = {"apiVersion": "apps/v1", "kind": kind, "metadata": meta,
               "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                        "template": {"metadata": {"labels": {"app": name}},
                                     "spec": {"containers": [{"name": "main", "image": "registry.invalid/bench:1",
                                                              "ports": [{"containerPort": 8080}]}]}}}}
    print("---")
    print(json.dumps(obj))
EOF
}

# Let the controllers finish reacting to a first apply (ReplicaSets, pods), so the no-op steps
# measure the tools and not the cluster catching up.
settle() {
  "$KUBECTL" wait --for=condition=Available deployment --all -n "$1" --timeout=300s >/dev/null
}

declare -A results
scenario() {
  local label=$1 manifest_for=$2
  local ns_m="bench-$label-mlkube-$$" ns_k="bench-$label-kubectl-$$"
  namespaces+=("$ns_m" "$ns_k")
  "$manifest_for" "$ns_m" >"$work/$label-mlkube.yaml"
  "$manifest_for" "$ns_k" >"$work/$label-kubectl.yaml"
  "$KUBECTL" create namespace "$ns_k" >/dev/null
  local m=("$MLKUBE" apply "$ns_m" --manifest "$work/$label-mlkube.yaml" --no-wait --yes --force-conflicts)
  local md=("$MLKUBE" diff "$ns_m" --manifest "$work/$label-mlkube.yaml")
  local k=("$KUBECTL" apply --server-side --force-conflicts -f "$work/$label-kubectl.yaml")
  local kd=("$KUBECTL" diff --server-side --force-conflicts -f "$work/$label-kubectl.yaml")
  # One tool after the other: the default app's cluster-scoped objects are shared, and the
  # other tool's apply in between would be a real difference for the diff that follows.
  say "$label: mlkube: first apply, no-op re-apply x$RUNS, no-op diff x$RUNS"
  results[$label,first,mlkube]=$(time_it 0 "${m[@]}")
  settle "$ns_m"
  results[$label,reapply,mlkube]=$(repeat 0 "${m[@]}")
  # Exit 0 only: a no-op diff that finds differences would be noise, and is a failure here.
  results[$label,diff,mlkube]=$(repeat 0 "${md[@]}")
  say "$label: kubectl: first apply, no-op re-apply x$RUNS, no-op diff x$RUNS"
  results[$label,first,kubectl]=$(time_it 0 "${k[@]}")
  settle "$ns_k"
  results[$label,reapply,kubectl]=$(repeat 0 "${k[@]}")
  results[$label,diff,kubectl]=$(repeat 0 "${kd[@]}")
}

synthetic_n() { synthetic "$1" "$N"; }
default_app() {
  # The default app's local environment, in an app of its own per namespace. Both tools share its
  # cluster-scoped objects (CRDs, a StorageClass), hence --force-conflicts on both sides.
  "$MLKUBE" init "$work/app-$1" --namespace "$1" >/dev/null 2>&1
  (cd "$work/app-$1" && "$MLKUBE" show local)
}

scenario "synthetic$N" synthetic_n
labels=("synthetic$N")
if "$MLKUBE" init "$work/probe" >/dev/null 2>&1 && (cd "$work/probe" && "$MLKUBE" show local >/dev/null 2>&1); then
  scenario default default_app
  labels+=(default)
else
  say "skipping the default app: 'mlkube init' / 'mlkube show' do not work in this build"
fi

echo "| scenario | step | mlkube (s) | kubectl (s) | speed-up |"
echo "|---|---|---:|---:|---:|"
for label in "${labels[@]}"; do
  for step in first reapply diff; do
    m=${results[$label,$step,mlkube]}
    k=${results[$label,$step,kubectl]}
    printf '| %s | %s | %s | %s | %.1fx |\n' "$label" "$step" "$m" "$k" "$(echo "$k / $m" | bc -l)"
  done
done
echo
echo "mlkube: $MLKUBE; kubectl: $("$KUBECTL" version --client 2>/dev/null | head -n1); runs: $RUNS (median); $(nproc) cores"
