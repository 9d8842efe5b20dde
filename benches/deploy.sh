#!/usr/bin/env bash
# Deploy speed, side by side and by size: mlkube against kubectl (server-side apply and diff),
# kapp and Grafana Tanka on the same synthetic objects, against the local control plane.
#
#   cluster/local-cluster.sh up && eval "$(cluster/local-cluster.sh env)"
#   benches/deploy.sh            # Markdown tables on stdout, progress on stderr
#
# For each size (SIZES, default "500 5000": ConfigMaps, Services and Deployments in equal
# parts), each tool gets a namespace of its own and runs, in that order:
#   first     the first apply into the empty namespace (once)
#   reapply   the same apply again, nothing to change (RUNS times, median)
#   diff      the diff of the same objects, nothing to change (RUNS times, median)
#   change    an apply that changes every ConfigMap (a third of the objects; once)
# The tools take turns in a rotated order (the first tool of one size is the last of the next),
# and the cluster settles (every Deployment available) after each first apply, so the no-op
# steps measure the tools and not the cluster catching up. mlkube applies with --no-wait and
# kapp with --wait=false, since kubectl apply does not wait.
#
# The tables give each step's time per object (milliseconds), so a tool whose work grows
# linearly shows the same figure at every size; the last table is mlkube's growth: the
# per-object time at the largest size over the one at the smallest.
#
# The peers run only when found: kubectl (KUBECTL, default the local cluster's own), kapp (KAPP)
# and tk (TK), each by default in ~/.cache/mlkube/peers/bin or on PATH; docs/benchmarks.md's
# "Deploy speed" says how to build kapp and Tanka there from their Go modules. Tanka drives kubectl: it runs with the server-side apply and diff strategies and finds the
# cluster by the API server's address in KUBECONFIG.
#
# Settings (environment): MLKUBE (default: the release build), KUBECTL, KAPP, TK, SIZES, RUNS
# (default 3), TOOLS (default "mlkube kubectl kapp tanka", those found).
set -euo pipefail

target=${CARGO_TARGET_DIR:-$HOME/.cache/mlkube/target}
peers=$HOME/.cache/mlkube/peers/bin
if [ -z "${MLKUBE:-}" ]; then
  if [ -x "$target/release/mlkube" ]; then MLKUBE=$target/release/mlkube; else MLKUBE=$target/debug/mlkube; fi
fi
find_tool() { # name, override
  if [ -n "$2" ]; then echo "$2"; return; fi
  if [ -x "$peers/$1" ]; then echo "$peers/$1"; return; fi
  command -v "$1" || true
}
# shellcheck disable=SC2012 # the cache's own paths, without newlines
KUBECTL=$(find_tool kubectl "${KUBECTL:-$(ls -d "$HOME"/.cache/mlkube/controlplane/k8s-*/bin/kubectl 2>/dev/null | tail -n1)}")
KAPP=$(find_tool kapp "${KAPP:-}")
TK=$(find_tool tk "${TK:-}")
SIZES=${SIZES:-500 5000}
RUNS=${RUNS:-3}
TOOLS=${TOOLS:-mlkube kubectl kapp tanka}

die() { printf 'deploy bench: error: %s\n' "$*" >&2; exit 1; }
say() { printf 'deploy bench: %s\n' "$*" >&2; }
[ -x "$MLKUBE" ] || die "no mlkube binary at $MLKUBE; build it with 'cargo build --release' or set MLKUBE"
[ -x "$KUBECTL" ] || die "no kubectl at $KUBECTL; run cluster/local-cluster.sh build, or set KUBECTL"
[ -n "${KUBECONFIG:-}" ] || die "KUBECONFIG is not set; run: eval \"\$(cluster/local-cluster.sh env)\""
"$KUBECTL" get --raw /readyz >/dev/null 2>&1 || die "the cluster in $KUBECONFIG is not ready; run cluster/local-cluster.sh up"
server=$("$KUBECTL" config view --minify -o jsonpath='{.clusters[0].cluster.server}')

tools=()
for tool in $TOOLS; do
  case $tool in
    mlkube | kubectl) tools+=("$tool") ;;
    kapp) if [ -x "$KAPP" ]; then tools+=(kapp); else say "kapp not found: skipped (set KAPP)"; fi ;;
    tanka) if [ -x "$TK" ]; then tools+=(tanka); else say "tk not found: skipped (set TK)"; fi ;;
    *) die "unknown tool $tool in TOOLS" ;;
  esac
done

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
  "$@" >"$work/out" 2>"$work/err" </dev/null
  status=$?
  set -e
  end=$(date +%s.%N)
  case " $allowed " in
    *" $status "*) ;;
    *) say "command failed ($status): $*"; tail -n 20 "$work/err" "$work/out" >&2; exit 1 ;;
  esac
  echo "$end - $start" | bc -l | xargs printf '%.3f\n'
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

repeat() {
  local allowed=$1
  shift
  for _ in $(seq "$RUNS"); do time_it "$allowed" "$@"; done | median
}

# The synthetic objects, as JSON documents (which are YAML documents too). `level` is what the
# change step changes.
synthetic() {
  local ns=$1 n=$2 level=$3
  python3 - "$ns" "$n" "$level" <<'EOF'
import json, sys
ns, n, level = sys.argv[1], int(sys.argv[2]), sys.argv[3]
kinds = ["ConfigMap", "Service", "Deployment"]
for i in range(n):
    kind = kinds[i % 3]
    name = f"obj-{i:05d}"
    labels = {"app.kubernetes.io/managed-by": "bench", "mlkube.io/component": f"c{i % 10}"}
    meta = {"name": name, "namespace": ns, "labels": labels}
    if kind == "ConfigMap":
        obj = {"apiVersion": "v1", "kind": kind, "metadata": meta,
               "data": {"index": str(i), "settings.yaml": f"replicas: 1\nlevel: {level}\n"}}
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

# A Tanka project whose one environment evaluates to the objects of a manifest (JSON is
# Jsonnet), pinned to this cluster and namespace, applied and diffed server-side.
tanka_project() {
  local dir=$1 ns=$2 manifest=$3
  mkdir -p "$dir/environments/bench"
  echo '{"version": 1, "dependencies": [], "legacyImports": true}' >"$dir/jsonnetfile.json"
  printf '{"apiVersion": "tanka.dev/v1alpha1", "kind": "Environment", "metadata": {"name": "environments/bench"}, "spec": {"apiServer": "%s", "namespace": "%s", "applyStrategy": "server", "diffStrategy": "server"}}\n' \
    "$server" "$ns" >"$dir/environments/bench/spec.json"
  python3 - "$manifest" >"$dir/environments/bench/main.jsonnet" <<'EOF'
import json, sys
docs = [json.loads(d) for d in open(sys.argv[1]).read().split("---\n") if d.strip()]
print(json.dumps({d["kind"] + "-" + d["metadata"]["name"]: d for d in docs}))
EOF
}

# The command of one tool for one step: apply (first, reapply, change) or diff.
command_for() {
  local tool=$1 step=$2 ns=$3 manifest=$4
  case $tool:$step in
    mlkube:apply) echo "$MLKUBE" apply "$ns" --manifest "$manifest" --no-wait --yes --force-conflicts ;;
    mlkube:diff) echo "$MLKUBE" diff "$ns" --manifest "$manifest" ;;
    kubectl:apply) echo "$KUBECTL" apply --server-side --force-conflicts -f "$manifest" ;;
    kubectl:diff) echo "$KUBECTL" diff --server-side --force-conflicts -f "$manifest" ;;
    kapp:apply) echo "$KAPP" deploy -a bench -n "$ns" -f "$manifest" --yes --wait=false ;;
    kapp:diff) echo "$KAPP" deploy -a bench -n "$ns" -f "$manifest" --diff-run ;;
    tanka:apply) echo "$TK" apply "$work/tanka-$ns/environments/bench" --auto-approve always ;;
    tanka:diff) echo "$TK" diff "$work/tanka-$ns/environments/bench" ;;
  esac
}

# Let the controllers finish reacting to a first apply (ReplicaSets, pods).
settle() {
  "$KUBECTL" wait --for=condition=Available deployment --all -n "$1" --timeout=600s >/dev/null
}

declare -A results
run_tool() {
  local tool=$1 n=$2
  local ns="bench-$n-$tool-$$"
  namespaces+=("$ns")
  local manifest=$work/$ns.yaml changed=$work/$ns-changed.yaml
  synthetic "$ns" "$n" info >"$manifest"
  synthetic "$ns" "$n" debug >"$changed"
  [ "$tool" = mlkube ] || "$KUBECTL" create namespace "$ns" >/dev/null
  # shellcheck disable=SC2207
  local apply=($(command_for "$tool" apply "$ns" "$manifest"))
  # shellcheck disable=SC2207
  local diff=($(command_for "$tool" diff "$ns" "$manifest"))
  # shellcheck disable=SC2207
  local change=($(command_for "$tool" apply "$ns" "$changed"))
  if [ "$tool" = tanka ]; then tanka_project "$work/tanka-$ns" "$ns" "$manifest"; fi
  say "$n objects, $tool: first apply, no-op re-apply x$RUNS, no-op diff x$RUNS, change"
  results[$n,first,$tool]=$(time_it 0 "${apply[@]}")
  settle "$ns"
  results[$n,reapply,$tool]=$(repeat 0 "${apply[@]}")
  # Exit 0 only: a no-op diff that finds differences would be noise, and is a failure here.
  results[$n,diff,$tool]=$(repeat 0 "${diff[@]}")
  if [ "$tool" = tanka ]; then tanka_project "$work/tanka-$ns" "$ns" "$changed"; fi
  results[$n,change,$tool]=$(time_it 0 "${change[@]}")
  # The next tool starts on a cluster without this one's objects and pods.
  "$KUBECTL" delete namespace "$ns" --timeout=600s >/dev/null
}

load=$(cut -d' ' -f1-3 /proc/loadavg)
rotation=0
for n in $SIZES; do
  count=${#tools[@]}
  for i in $(seq 0 $((count - 1))); do
    run_tool "${tools[$(((i + rotation) % count))]}" "$n"
  done
  rotation=$((rotation + 1))
done

per_object() { echo "$1 * 1000 / $2" | bc -l | xargs printf '%.3f'; }
header="| objects | step |"
rule="|---:|---|"
for tool in "${tools[@]}"; do header+=" $tool ms/object (s) |"; rule+="---:|"; done
echo "$header"
echo "$rule"
for n in $SIZES; do
  for step in first reapply diff change; do
    row="| $n | $step |"
    for tool in "${tools[@]}"; do
      t=${results[$n,$step,$tool]}
      row+=" $(per_object "$t" "$n") ($t) |"
    done
    echo "$row"
  done
done
read -ra sizes <<<"$SIZES"
small=${sizes[0]} large=${sizes[-1]}
if [ "$small" != "$large" ]; then
  echo
  echo "| step | growth of the time per object, $small to $large objects: $(printf '%s, ' "${tools[@]}" | sed 's/, $//') |"
  echo "|---|---|"
  for step in first reapply diff change; do
    row="| $step |"
    for tool in "${tools[@]}"; do
      a=$(per_object "${results[$small,$step,$tool]}" "$small")
      b=$(per_object "${results[$large,$step,$tool]}" "$large")
      row+=" $tool $(echo "$b / $a" | bc -l | xargs printf '%.2f')x"
    done
    echo "$row |"
  done
  m=${results[$large,diff,mlkube]}
  for tool in "${tools[@]}"; do
    [ "$tool" = mlkube ] && continue
    echo
    printf 'no-op diff at %s objects: mlkube %ss, %s %ss: %.1fx\n' "$large" "$m" "$tool" \
      "${results[$large,diff,$tool]}" "$(echo "${results[$large,diff,$tool]} / $m" | bc -l)"
  done
fi
echo
echo "mlkube: $MLKUBE; kubectl: $("$KUBECTL" version --client 2>/dev/null | head -n1)$([ -x "$KAPP" ] && echo "; kapp: $("$KAPP" version 2>/dev/null | head -n1)")$([ -x "$TK" ] && echo "; tk: $("$TK" --version 2>&1 | head -n1)"); runs: $RUNS (median); $(nproc) cores; load average at the start: $load"
