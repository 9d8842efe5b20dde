# shellcheck shell=bash
# The Go programs only the real nodes run, built once from their upstream modules: CoreDNS (with
# the plugins the Corefile uses and no others), flanneld, kube-router and
# local-path-provisioner. Sourced by cluster/real-node.sh.
#
# They are built in one module of our own that requires all four, so that what they share
# (client-go and the Kubernetes API types above all) compiles once: minimal version selection
# gives each the newest version any of them requires (client-go v0.35 for all four, as CoreDNS
# requires it). From an empty build cache on 2 cores, built apart they took 633 CPU-seconds,
# together 331. All are built with cgo, which flannel's UDP backend needs (its C proxy): built
# without it, flannel would share nothing with the others. They run on the host, in the
# cluster's namespaces, so linking the host's C library is no loss. A new version of any of them
# builds all four again (a minute more than one alone).

COREDNS_VERSION=v1.14.7
# The plugins write_corefile uses, the only ones built in. CoreDNS's full build compiles every
# cloud's SDK for plugins nothing here uses, half again the work.
COREDNS_PLUGINS=(bind errors kubernetes cache template)
FLANNEL_VERSION=v0.28.4
KUBE_ROUTER_VERSION=v2.1.0
LOCAL_PATH_VERSION=v0.0.30

# The module's go.mod. flannel's main package links every backend; the Tencent VPC one needs a
# Tencent SDK (tencentcloud/common v1.3.79) the module proxy no longer serves, so a served
# version of it is required.
node_parts_go_mod() {
  printf '%s\n' "module mlkube.local/node-parts" "" "go 1.25.0" "" "require (" \
    "	github.com/coredns/coredns $COREDNS_VERSION" \
    "	github.com/flannel-io/flannel $FLANNEL_VERSION" \
    "	github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/common v1.3.211" \
    "	github.com/cloudnativelabs/kube-router/v2 $KUBE_ROUTER_VERSION" \
    "	github.com/rancher/local-path-provisioner $LOCAL_PATH_VERSION" ")"
}

# CoreDNS's main, as its docs build a server of chosen plugins: it imports them and runs.
coredns_main() {
  local plugin
  printf '%s\n' "package main" "" "import ("
  for plugin in "${COREDNS_PLUGINS[@]}"; do printf '\t_ "github.com/coredns/coredns/plugin/%s"\n' "$plugin"; done
  printf '%s\n' '	"github.com/coredns/coredns/coremain"' ")" "" "func main() { coremain.Run() }"
}

# The upstream main packages, imported so that `go mod tidy` keeps what they need.
FLANNEL_PACKAGE=github.com/flannel-io/flannel
KUBE_ROUTER_PACKAGE=github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
LOCAL_PATH_PACKAGE=github.com/rancher/local-path-provisioner
node_parts_tools() {
  printf '%s\n' '//go:build tools' '' 'package tools' '' 'import (' \
    "	_ \"$FLANNEL_PACKAGE\"" "	_ \"$KUBE_ROUTER_PACKAGE\"" "	_ \"$LOCAL_PATH_PACKAGE\"" ')'
}

# Named after what is built, so that a change to any of it builds afresh.
NODE_PARTS_DIR=$CACHE_ROOT/node-parts-$({ node_parts_go_mod; coredns_main; node_parts_tools; } |
  sha256sum | cut -c1-12)
COREDNS_BIN=$NODE_PARTS_DIR/bin/coredns
FLANNEL_BIN=$NODE_PARTS_DIR/bin/flanneld
KUBE_ROUTER_BIN=$NODE_PARTS_DIR/bin/kube-router
LOCAL_PATH_BIN=$NODE_PARTS_DIR/bin/local-path-provisioner

node_parts_built() {
  local bin
  for bin in "$COREDNS_BIN" "$FLANNEL_BIN" "$KUBE_ROUTER_BIN" "$LOCAL_PATH_BIN"; do
    [ -x "$bin" ] || return 1
  done
}

build_node_parts() {
  local started=$SECONDS log=$NODE_PARTS_DIR/build.log module=$NODE_PARTS_DIR/module
  node_parts_built && return 0
  require_go
  mkdir -p "$module/coredns" "$NODE_PARTS_DIR/bin"
  node_parts_go_mod >"$module/go.mod"
  coredns_main >"$module/coredns/main.go"
  node_parts_tools >"$module/tools.go"
  say "building CoreDNS, flannel, kube-router and local-path-provisioner once (about 3 minutes on 2 cores); log: $log"
  with_progress "the nodes' Go programs' build" node_parts_build_in "$module" "$log" ||
    die_with_log "building the nodes' Go programs failed" "$log"
  say "built them in $((SECONDS - started))s"
}

# The module's dependencies resolved and its programs built, the output into LOG: MODULE LOG.
node_parts_build_in() {
  (cd "$1" && GOFLAGS=-mod=mod go mod tidy && node_parts_build) >"$2" 2>&1
}

# Two builds: local-path-provisioner imports logrus as github.com/Sirupsen/logrus, the others
# as github.com/sirupsen/logrus, and one build refuses both spellings. Run in the module.
node_parts_build() {
  local bin=$NODE_PARTS_DIR/bin
  local -a go_build=(env GOFLAGS=-mod=mod CGO_ENABLED=1 "${GO_BUILD_ENV[@]}" nice go build -trimpath -gcflags=all=-dwarf=false)
  "${go_build[@]}" -ldflags="-s -X github.com/flannel-io/flannel/pkg/version.Version=$FLANNEL_VERSION" \
    -o "$bin/" ./coredns "$FLANNEL_PACKAGE" "$KUBE_ROUTER_PACKAGE" &&
    mv "$bin/flannel" "$FLANNEL_BIN" &&
    "${go_build[@]}" -ldflags="-s -X main.VERSION=$LOCAL_PATH_VERSION" -o "$bin/" "$LOCAL_PATH_PACKAGE"
}
