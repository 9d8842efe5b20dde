#!/usr/bin/env bash
# Microsoft's FrameworkController, built from a checkout of github.com/microsoft/frameworkcontroller,
# for the operator bench to run on the same Frameworks as mlkube's controller:
#
#   fc=$(benches/frameworkcontroller.sh /path/to/frameworkcontroller)
#   PEER=$fc FRAMEWORK=frameworkcontroller cargo bench --bench operator
#
# It takes a checkout, not a module version: the module proxy does not serve that module here,
# and the repository commits its vendor/ directory, so the build needs no network at all
# (-mod=vendor, GOPROXY=off). The binary goes to
# ${MLKUBE_CACHE:-~/.cache/mlkube}/frameworkcontroller-<key>/frameworkcontroller, never into
# either repository, and is built once per key: the checkout's commit when its work tree is
# clean, else a hash of its files (an archive, or a checkout with changes). Prints the binary's
# path on stdout; progress on stderr.
set -euo pipefail

say() { printf 'frameworkcontroller build: %s\n' "$*" >&2; }
die() { printf 'frameworkcontroller build: error: %s\n' "$*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: $0 SOURCE_DIR (a checkout of github.com/microsoft/frameworkcontroller)"
source_dir=$(cd "$1" 2>/dev/null && pwd) || die "no directory $1"
[ -d "$source_dir/cmd/frameworkcontroller" ] ||
  die "$source_dir has no cmd/frameworkcontroller: is it a checkout of github.com/microsoft/frameworkcontroller?"
[ -f "$source_dir/vendor/modules.txt" ] ||
  die "$source_dir has no vendor/modules.txt; hint: the repository commits vendor/, so check out a commit that has it (or run \`go mod vendor\` there)"
command -v go >/dev/null || die "no go on PATH; hint: install Go, or put /usr/local/go/bin on PATH"
# shellcheck source=SCRIPTDIR/../image/go.sh
source "$(dirname "$0")/../image/go.sh"

# What the binary is built from: the commit, or the files themselves when they differ from any.
key() {
  if git -C "$source_dir" rev-parse --is-inside-work-tree >/dev/null 2>&1 &&
    [ -z "$(git -C "$source_dir" status --porcelain)" ]; then
    git -C "$source_dir" rev-parse --short=12 HEAD
  else
    (cd "$source_dir" && find . -type f ! -path './.git/*' -print0 | LC_ALL=C sort -z |
      xargs -0 sha256sum | sha256sum | cut -c1-12 | sed 's/^/tree-/')
  fi
}

out_dir=${MLKUBE_CACHE:-$HOME/.cache/mlkube}/frameworkcontroller-$(key)
binary=$out_dir/frameworkcontroller
if [ ! -x "$binary" ]; then
  say "building $source_dir into $out_dir (about a minute on 2 cores)"
  mkdir -p "$out_dir"
  # Into a temporary name first, so that an interrupted build is never taken for a built one.
  (cd "$source_dir" && GOFLAGS=-mod=vendor GOPROXY=off GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 \
    env "${GO_BUILD_ENV[@]}" go build -trimpath -ldflags=-s -o "$binary.partial" ./cmd/frameworkcontroller) ||
    die "go build failed in $source_dir; hint: the vendor/ directory must match go.mod (\`go mod vendor\` there)"
  mv "$binary.partial" "$binary"
fi
echo "$binary"
