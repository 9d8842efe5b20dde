# shellcheck shell=bash
# Building the control plane's binaries once into the cache, from upstream's Go modules, and
# the Go commands the real node adds (go_install_once). Sourced by cluster/local-cluster.sh.
# Every Go build of the project (here, cluster/node/ and image/) links stripped binaries (-s),
# whose debug info would be thrown away, so the compiler makes none (-gcflags=all=-dwarf=false):
# 9% less CPU for the same binary (the registry: 141 CPU-seconds cold, then 128).

require_go() {
  command -v go >/dev/null 2>&1 ||
    die "the Go toolchain is not on PATH; it is needed once, to build the control plane" \
      "install Go 1.25 or newer, put its bin directory on PATH, and run this again"
  local version
  version=$(go env GOVERSION 2>/dev/null | sed 's/^go//')
  case "$version" in
    1.2[5-9]* | 1.[3-9][0-9]* | [2-9].*) ;;
    *) die "Go $version is too old to build Kubernetes $K8S_VERSION" "install Go 1.25 or newer and put it first on PATH" ;;
  esac
}

# Go's main package MODULE@VERSION built once with `go install` as BIN (a path ending in
# bin/<command>), at a low priority, its log beside that bin directory: NAME VERSION MODULE BIN
# MINUTES (how long it takes on 2 cores, to say so) [LINKER FLAGS].
go_install_once() {
  local name=$1 version=$2 module=$3 bin=$4 minutes=$5 ldflags=${6:--s} log started=$SECONDS
  [ -x "$bin" ] && return 0
  require_go
  log=$(dirname "$(dirname "$bin")")/build.log
  mkdir -p "$(dirname "$bin")"
  : >"$log"
  say "building $name $version once (about $minutes minutes on 2 cores); log: $log"
  with_progress "$name's build" go_install_into "$log" "$(dirname "$bin")" "$ldflags" "$module@$version" ||
    die_with_log "building $name failed" "$log"
  say "built $name in $((SECONDS - started))s"
}

# go install of MODULE@VERSION into GOBIN, its output added to LOG: LOG GOBIN LDFLAGS MODULE@VERSION.
go_install_into() {
  GOBIN=$2 CGO_ENABLED=0 env "${GO_BUILD_ENV[@]}" nice go install -trimpath -gcflags=all=-dwarf=false -ldflags="$3" "$4" \
    >>"$1" 2>&1
}

have_binaries() {
  local b
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy kwok; do
    [ -x "$BIN_DIR/$b" ] || return 1
  done
}

# The Kubernetes commands live in k8s.io/kubernetes, whose go.mod points its k8s.io/* staging
# modules at local paths; a module of our own must pin each of them to the published v0.X.Y.
# etcd is built in the same module so that it shares one pinned dependency set.
write_controlplane_module() {
  local dir=$1 staging
  staging=$(sed -n 's#^\s*\(k8s\.io/[a-z0-9-]*\) => ./staging/.*#\1#p' \
    "$(go env GOMODCACHE)/k8s.io/kubernetes@$K8S_VERSION/go.mod")
  [ -n "$staging" ] || die "could not read the staging modules of k8s.io/kubernetes@$K8S_VERSION"
  {
    echo "module mlkube.local/controlplane"
    echo
    echo "go 1.25.0"
    echo
    echo "require ("
    echo "	k8s.io/kubernetes $K8S_VERSION"
    echo "	go.etcd.io/etcd/server/v3 $ETCD_VERSION"
    echo "	go.etcd.io/etcd/api/v3 $ETCD_VERSION"
    echo "	go.etcd.io/etcd/client/pkg/v3 $ETCD_VERSION"
    echo "	go.etcd.io/etcd/client/v3 $ETCD_VERSION"
    echo "	go.etcd.io/etcd/pkg/v3 $ETCD_VERSION"
    echo ")"
    echo
    echo "replace ("
    for m in $staging; do echo "	$m => $m $K8S_STAGING_VERSION"; done
    echo ")"
  } >"$dir/go.mod"
}

# The linker flags that stamp the Kubernetes version into its binaries, as upstream's release
# build does (hack/lib/version.sh): k8s.io/component-base/version serves `/version` and
# `kubectl version --client`, client-go's copy names the client to the server. Without them
# both say v0.0.0-master+$Format:%H$, `kubectl version` exits 1, and tools that compare
# versions (Tanka's "obtaining versions") refuse the cluster. The module proxy serves the source
# without its git history, so the commit is left empty and the tree state is `archive`,
# upstream's word for a tree that did not come from a git checkout.
version_ldflags() {
  local major minor package flags="-s"
  major=${K8S_VERSION#v}
  minor=${major#*.}
  major=${major%%.*}
  minor=${minor%%.*}
  for package in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $package.gitVersion=$K8S_VERSION -X $package.gitMajor=$major -X $package.gitMinor=$minor"
    flags+=" -X $package.gitCommit= -X $package.gitTreeState=archive"
    flags+=" -X $package.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  done
  echo "$flags"
}

build() {
  if have_binaries; then
    say "binaries are cached in $BIN_DIR"
    return 0
  fi
  require_go
  local work log started=$SECONDS
  work=$CACHE_ROOT/controlplane/build-$K8S_VERSION
  log=$work/build.log
  mkdir -p "$work" "$BIN_DIR"
  : >"$log"
  say "building the control plane once (k8s $K8S_VERSION, etcd $ETCD_VERSION, kwok $KWOK_VERSION); log: $log"
  say "this takes 6-7 minutes on 2 idle cores (far longer on a busy machine); later runs use the cache"
  with_progress "the control plane's build" build_controlplane "$work" "$log" ||
    die_with_log "building the Kubernetes control plane failed" "$log"
  # kwok is a client of the API server only; it keeps its own dependency set.
  with_progress "kwok's build" go_install_into "$log" "$BIN_DIR" -s "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" ||
    die_with_log "building kwok failed" "$log"
  have_binaries || die "the build finished but binaries are missing from $BIN_DIR"
  say "built in $((SECONDS - started))s into $BIN_DIR"
}

# The control plane's module in WORK and its binaries built into BIN_DIR (etcd's main package is
# its server module, so the binary comes out named after it), their output into LOG: WORK LOG.
build_controlplane() {
  (
    cd "$1" &&
      go mod download "k8s.io/kubernetes@$K8S_VERSION" &&
      write_controlplane_module "$1" &&
      GOFLAGS=-mod=mod go mod download all &&
      GOFLAGS=-mod=mod CGO_ENABLED=0 env "${GO_BUILD_ENV[@]}" go build -trimpath -gcflags=all=-dwarf=false -ldflags="$(version_ldflags)" -o "$BIN_DIR/" \
        go.etcd.io/etcd/server/v3 \
        k8s.io/kubernetes/cmd/kube-apiserver \
        k8s.io/kubernetes/cmd/kube-controller-manager \
        k8s.io/kubernetes/cmd/kube-scheduler \
        k8s.io/kubernetes/cmd/kubectl \
        k8s.io/kubernetes/cmd/kubelet \
        k8s.io/kubernetes/cmd/kube-proxy &&
      mv "$BIN_DIR/server" "$BIN_DIR/etcd"
  ) >>"$2" 2>&1
}
