#!/usr/bin/env bash
# Rendering speed: `mlkube show` against the C++ `jsonnet` and go-jsonnet on the same Jsonnet.
#
#   benches/render.sh            # both benchmarks
#   QUICK=1 benches/render.sh    # fewer runs of the slow reference binaries
#
# 1. The default app (`mlkube init`), environment prod, as a whole process. The reference
#    binaries evaluate a driver that calls the same embedded prototypes with the params mlkube
#    resolves for prod (taken from `mlkube param list --env prod -o json`), so they do the same
#    Jsonnet work; mlkube additionally checks params, unwraps, labels, sorts and prints YAML.
# 2. A synthetic app of 2,000 objects (benches/synthetic.jsonnet: mixins over `super`,
#    comprehensions, std.manifestYamlDoc), rendered by mlkube as a hand-written component and
#    evaluated directly by the reference binaries.
#
# Needs: hyperfine; `jsonnet` (Debian package jsonnet, the C++ implementation); go-jsonnet, built
# with `GOBIN=$HOME/.cache/mlkube/tools go install github.com/google/go-jsonnet/cmd/jsonnet@latest`
# and renamed to go-jsonnet. Override the paths with JSONNET=..., GO_JSONNET=..., MLKUBE=....
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}
if [[ -z ${MLKUBE:-} ]]; then
  cargo build --release --quiet --manifest-path "$repo/Cargo.toml"
  MLKUBE=$target/release/mlkube
fi
JSONNET=${JSONNET:-$(command -v jsonnet || true)}
GO_JSONNET=${GO_JSONNET:-$HOME/.cache/mlkube/tools/go-jsonnet}
for tool in hyperfine "$JSONNET" "$GO_JSONNET" "$MLKUBE"; do
  if [[ -z $tool ]] || ! command -v "$tool" >/dev/null; then
    echo "render.sh: missing tool: ${tool:-jsonnet}" >&2
    exit 2
  fi
done
if [[ -n ${QUICK:-} ]]; then slow_runs=(--runs 3); else slow_runs=(--min-runs 5); fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The component library under the mlkube/ import prefix, as a jpath for the reference binaries.
mkdir -p "$work/lib/mlkube"
cp -r "$repo/components/." "$work/lib/mlkube/"
cp -r "$repo/crds" "$work/lib/mlkube/crds"

# Debian's C++ jsonnet (0.18) predates std.all, std.sum and std.trim, and its std.parseYaml fails
# on multi-line strings; give it a copy of the library with those three defined over older std
# functions and the CRDs pre-converted to JSON (imported directly). Its output is then
# byte-for-byte go-jsonnet's.
cp -r "$work/lib" "$work/lib-cpp"
shim="local std0 = std; local std = std0 { all(xs):: std0.foldl(function(a, x) a && x, xs, true), sum(xs):: std0.foldl(function(a, x) a + x, xs, 0), trim(s):: std0.stripChars(s, ' \\t\\n\\f\\r\\u0085\\u00A0') };"
for file in "$work/lib-cpp/mlkube/"*.libsonnet; do
  { echo "$shim"; cat "$file"; } >"$file.tmp" && mv "$file.tmp" "$file"
done
sed -i "s|std.parseYaml(importstr '\(mlkube/crds/[^']*\)')|(import '\1')|g" "$work/lib-cpp/mlkube/"*.libsonnet
for crd in "$work/lib-cpp/mlkube/crds/"*.yaml; do
  "$GO_JSONNET" -e "std.parseYaml(importstr '$crd')" >"$crd.json" && mv "$crd.json" "$crd"
done

# 1. The default app.
"$MLKUBE" init "$work/default" 2>/dev/null
"$MLKUBE" --app "$work/default" param list --env prod -o json >"$work/params.json"
namespace=$("$MLKUBE" --app "$work/default" env list | awk '$1 == "prod" { print $2 }')
{
  echo "local rows = import 'params.json';"
  echo "local params(c) = { [r.param]: r.value for r in rows if r.component == c } + { name: c };"
  echo "local env = { name: 'prod', namespace: '$namespace', server: null };"
  echo "{"
  "$MLKUBE" --app "$work/default" component list | tail -n +2 | while read -r name prototype _; do
    echo "  '$name': (import 'mlkube/$prototype.libsonnet').render(params('$name'), env),"
  done
  echo "}"
} >"$work/default.jsonnet"

if ! cmp -s <("$JSONNET" -J "$work/lib-cpp" "$work/default.jsonnet") <("$GO_JSONNET" -J "$work/lib" "$work/default.jsonnet"); then
  echo "render.sh: the C++ jsonnet and go-jsonnet disagree on the default app" >&2
  exit 2
fi
echo "== default app, mlkube show prod ($("$MLKUBE" --app "$work/default" show prod | grep -c '^---$') objects)"
hyperfine --warmup 3 --export-markdown "$work/default.md" \
  -n "mlkube show prod" "$MLKUBE --app $work/default show prod" \
  -n "jsonnet (C++)" "$JSONNET -J $work/lib-cpp $work/default.jsonnet" \
  -n "go-jsonnet" "$GO_JSONNET -J $work/lib $work/default.jsonnet"

# 2. The synthetic app.
"$MLKUBE" init --empty "$work/synthetic" 2>/dev/null
cp "$repo/benches/synthetic.jsonnet" "$work/synthetic/components/synthetic.jsonnet"
echo
echo "== synthetic app ($("$MLKUBE" --app "$work/synthetic" show prod | grep -c '^---$') objects)"
hyperfine --warmup 1 "${slow_runs[@]}" --export-markdown "$work/synthetic.md" \
  -n "mlkube show prod" "$MLKUBE --app $work/synthetic show prod" \
  -n "mlkube show prod -o json" "$MLKUBE --app $work/synthetic show prod -o json" \
  -n "jsonnet (C++)" "$JSONNET $work/synthetic/components/synthetic.jsonnet" \
  -n "go-jsonnet" "$GO_JSONNET $work/synthetic/components/synthetic.jsonnet"

echo
cat "$work/default.md" "$work/synthetic.md"
