#!/usr/bin/env bash
# The cost of the operator's CRDs in the everyday verbs: `diff`, `status` and `apply --dry-run`
# of an app whose environment runs the training operator (its seven kubeflow.org CRDs, about
# 200 kB each, are objects shared with other environments), nothing to change, against the local
# control plane; for mlkube (MLKUBE, default the release build) and, side by side, another build
# (BEFORE, e.g. one from before a change). Each binary gets an app and a namespace of its own,
# applies it once, and then each verb runs RUNS times (median). Progress on stderr, a Markdown
# table on stdout: seconds per verb and BEFORE's time over MLKUBE's.
#
#   cluster/local-cluster.sh up && eval "$(cluster/local-cluster.sh env)"
#   BEFORE=/path/to/older/mlkube benches/operator-app.sh
set -euo pipefail

target=${CARGO_TARGET_DIR:-$HOME/.cache/mlkube/target}
if [ -z "${MLKUBE:-}" ]; then
  if [ -x "$target/release/mlkube" ]; then MLKUBE=$target/release/mlkube; else MLKUBE=$target/debug/mlkube; fi
fi
RUNS=${RUNS:-5}
say() { printf 'operator-app bench: %s\n' "$*" >&2; }
die() { printf 'operator-app bench: error: %s\n' "$*" >&2; exit 1; }
[ -x "$MLKUBE" ] || die "no mlkube binary at $MLKUBE; build it or set MLKUBE"
[ -z "${BEFORE:-}" ] || [ -x "$BEFORE" ] || die "BEFORE names $BEFORE, which is not executable"
[ -n "${KUBECONFIG:-}" ] || die "KUBECONFIG is not set; run: eval \"\$(cluster/local-cluster.sh env)\""

work=$(mktemp -d)
apps=()
cleanup() {
  for app in "${apps[@]}"; do
    "${app%%:*}" --app "${app#*:}" delete local --yes --delete-namespace >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

seconds() { # allowed exit codes, then the command
  local allowed=$1 start status
  shift
  start=$(date +%s.%N)
  "$@" >/dev/null 2>"$work/err" </dev/null && status=0 || status=$?
  case " $allowed " in
    *" $status "*) ;;
    *) cat "$work/err" >&2; die "failed ($status): $*" ;;
  esac
  echo "$(date +%s.%N) - $start" | bc -l | xargs printf '%.3f\n'
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -A took
measure() { # label, binary
  local label=$1 bin=$2 app=$work/$1 ns
  ns="bench-operator-$label-$$"
  "$bin" init "$app" --namespace "$ns" >/dev/null 2>&1
  apps+=("$bin:$app")
  # The operator's component: `training-operator`, or `tf-job-operator` where an older mlkube
  # made the app.
  local operator
  operator=$("$bin" --app "$app" component list -o name | grep -x -e training-operator -e tf-job-operator)
  # Scoped to its namespace, so the two apps' operators do not overlap.
  "$bin" --app "$app" param set "$operator" deploymentScope namespace >/dev/null
  say "$label: the first apply of the operator component"
  seconds 0 "$bin" --app "$app" apply local -c "$operator" --no-wait >/dev/null
  for verb in diff status dry-run; do
    local args=("$verb" local -c "$operator") allowed=0
    case $verb in
      status) args=(status local) allowed="0 3" ;; # the app's other components are missing
      dry-run) args=(apply local -c "$operator" --dry-run --no-wait) ;;
    esac
    say "$label: $verb x$RUNS"
    took[$label,$verb]=$(for _ in $(seq "$RUNS"); do seconds "$allowed" "$bin" --app "$app" "${args[@]}"; done | median)
  done
}

load=$(cut -d' ' -f1-3 /proc/loadavg)
measure after "$MLKUBE"
[ -z "${BEFORE:-}" ] || measure before "$BEFORE"

echo "| verb (app with the operator, nothing to change) | mlkube (s) |$([ -n "${BEFORE:-}" ] && echo " before (s) | before / mlkube |")"
echo "|---|---:|$([ -n "${BEFORE:-}" ] && echo "---:|---:|")"
for verb in diff status dry-run; do
  row="| $verb | ${took[after,$verb]} |"
  if [ -n "${BEFORE:-}" ]; then
    row+=" ${took[before,$verb]} | $(echo "${took[before,$verb]} / ${took[after,$verb]}" | bc -l | xargs printf '%.1f')x |"
  fi
  echo "$row"
done
echo
echo "mlkube: $MLKUBE$([ -n "${BEFORE:-}" ] && echo "; before: $BEFORE"); runs: $RUNS (median); $(nproc) cores; load average at the start: $load"
