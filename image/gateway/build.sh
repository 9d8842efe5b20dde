#!/usr/bin/env bash
# The gateway's image: Traefik Proxy v3 (one static Go binary, built here from its Go module,
# never downloaded prebuilt) alone in one layer with an /etc/passwd naming its user, `gateway`
# (uid 65532), and nothing else: no shell, no CA bundle (it only proxies plain HTTP to services
# inside the cluster). The gateway component runs it as the data plane of the cluster's Gateway
# API implementation, fed its routes by `mlkube gateway-routes` through its HTTP provider:
# Traefik is pure Go (so it builds on this machine, where Envoy-based gateways, C++ with
# Bazel, cannot) and splits traffic by weights, which model serving needs.
# image/node-images.sh calls this with the image's name and caches the archive.
#
#   image/gateway/build.sh ARCHIVE REF   (e.g. REF docker.io/mlkube/gateway:0.1.0)
#   image/gateway/build.sh --binary      only `traefik`, into the cache (to build it ahead)
#
# `traefik` (144 MB) is built once per version into ${MLKUBE_CACHE:-$HOME/.cache/mlkube}/
# traefik-<version>/bin (9 minutes on 2 cores under load, Go's build cache holding only the
# packages the control plane's build shares with it; later builds reuse it), from a module of
# our own that requires Traefik's and copies its `replace` and `exclude` directives and go.sum
# (the module proxy's `go install module@version` refuses a module with replaces). What the module proxy does not give, and what stands in for it:
# - pkg/config/dynamic/ext is a module of its own inside Traefik's repository (its extension
#   point of the dynamic configuration: two empty structs, HTTP and Router), so Go leaves it
#   out of the zip and Traefik's go.mod points at it by a relative path. The build module holds
#   a directory with those two empty types in its place.
# - webui/static, the web UI's generated files, holds only a note in the zip. The binary embeds
#   that note instead of the dashboard, which the component leaves off anyway.
# - The version of Traefik's fork of go-http-auth (its basic and digest auth middlewares) that
#   it pins is not served: the fork's version of March 2020, which Traefik v2 used and which has
#   the same functions, stands in. The gateway component configures no auth middleware.
# - Several of the SDKs behind lego's DNS-01 challenge providers (ACME certificates through a
#   DNS host's API) are not served. The build replaces lego with a copy whose table of
#   providers is empty, so a DNS challenge fails with a message saying so; the
#   gateway serves plain HTTP inside the cluster and asks for no certificates.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../oci.sh
source "$(dirname "$0")/../oci.sh"
# shellcheck source=SCRIPTDIR/../go.sh
source "$(dirname "$0")/../go.sh"
BINARY_ONLY=false
if [ "${1:-}" = --binary ] && [ $# -eq 1 ]; then BINARY_ONLY=true; else oci_arguments "$0 ARCHIVE REF | --binary" "$@"; fi

TRAEFIK_MODULE=github.com/traefik/traefik/v3
TRAEFIK_VERSION=v3.7.13
EXT_MODULE=github.com/traefik/traefik/dynamic/ext
AUTH_MODULE=github.com/abbot/go-http-auth
AUTH_FORK=github.com/containous/go-http-auth
AUTH_FORK_VERSION=v0.4.1-0.20200324110947-a37a7636d23e
LEGO_MODULE=github.com/go-acme/lego/v5
TRAEFIK_DIR=${MLKUBE_CACHE:-$HOME/.cache/mlkube}/traefik-$TRAEFIK_VERSION
TRAEFIK=$TRAEFIK_DIR/bin/traefik
USER_ID=65532
HTTP_PORT=8000

# The module's go.mod lines that a module requiring it must repeat (its `replace` and `exclude`
# directives): the relative replace of the ext module points at our own directory instead, and
# go-http-auth at the fork's version that is served.
traefik_directives() {
  awk -v ext="$EXT_MODULE" -v auth="$AUTH_MODULE" -v fork="$AUTH_FORK $AUTH_FORK_VERSION" '
    $1 == "replace" && $2 == ext { print "replace " ext " => ./ext"; next }
    ($1 == auth || $2 == auth) && $0 ~ /=>/ { sub(/=>.*/, "=> " fork) }
    /^(replace|exclude) \(/ { block = 1; print; next }
    block { print; if ($0 ~ /^\)/) block = 0; next }
    /^(replace|exclude) / { print }' "$1"
}

# The version of MODULE that Traefik's go.mod requires.
required_version() {
  awk -v module="$2" '$1 == module { print $2; exit } $1 == "require" && $2 == module { print $3; exit }' "$1"
}

# lego's table of DNS-01 challenge providers, with none in it.
write_dns_providers() {
  cat >"$1" <<'GO'
// Package dns is lego's table of DNS-01 challenge providers as mlkube's build of Traefik has it:
// empty, because the module proxy lacks several of the providers' SDKs (image/gateway/build.sh).
package dns

import (
	"fmt"

	"github.com/go-acme/lego/v5/challenge"
)

// NewDNSChallengeProviderByName refuses every provider.
func NewDNSChallengeProviderByName(name string) (challenge.Provider, error) {
	return nil, fmt.Errorf("DNS challenge provider %q: this build of Traefik has no DNS challenge providers", name)
}
GO
}

# Traefik's dynamic-configuration extension point as its own build leaves it: no extra fields.
write_ext_module() {
  local dir=$1 go_version=$2
  mkdir -p "$dir"
  printf 'module %s\n\ngo %s\n' "$EXT_MODULE" "$go_version" >"$dir/go.mod"
  cat >"$dir/ext.go" <<'GO'
// Package ext stands in for Traefik's nested module of the same path, which its module zip
// leaves out: a build of Traefik that adds no fields to its HTTP configuration and routers.
package ext

// HTTP adds nothing to the dynamic HTTP configuration.
type HTTP struct{}

// Router adds nothing to an HTTP router.
type Router struct{}
GO
}

build_traefik() {
  [ -x "$TRAEFIK" ] && return 0
  command -v go >/dev/null || die "the Go toolchain is not on PATH; it builds Traefik once" \
    "install Go 1.26 or newer and put its bin directory on PATH"
  local work=$TRAEFIK_DIR/build log=$TRAEFIK_DIR/build.log started=$SECONDS
  rm -rf "$work"
  mkdir -p "$work" "$(dirname "$TRAEFIK")"
  say "building Traefik $TRAEFIK_VERSION once (about 9 minutes on 2 cores); log: $log"
  with_progress "Traefik's build" traefik_build_in "$work" "$log" ||
    die "building Traefik failed; the last lines of $log:" "$(tail -n 15 "$log" | tr '\n' ' ')"
  say "built traefik in $((SECONDS - started)) s"
}

# traefik built in the module WORK writes, its output into LOG: WORK LOG.
traefik_build_in() {
  (
    set -euo pipefail
    cd "$1"
    local source go_version lego
    source=$(go mod download -json "$TRAEFIK_MODULE@$TRAEFIK_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
    [ -f "$source/go.mod" ] || { echo "no go.mod in the downloaded module ($source)"; exit 1; }
    go_version=$(awk '/^go / {print $2; exit}' "$source/go.mod")
    {
      printf 'module mlkube.local/traefik\n\ngo %s\n\nrequire %s %s\n\n' \
        "$go_version" "$TRAEFIK_MODULE" "$TRAEFIK_VERSION"
      traefik_directives "$source/go.mod"
    } >go.mod
    write_ext_module ext "$go_version"
    # Its go.sum: the checksums of its dependencies, as Traefik resolved them.
    install -m 0644 "$source/go.sum" go.sum
    # A copy of lego (the module cache is read-only, and go build's -overlay may not replace
    # files there) with the table of providers emptied.
    lego=$(go mod download -json "$LEGO_MODULE@$(required_version "$source/go.mod" "$LEGO_MODULE")" |
      sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
    [ -f "$lego/providers/dns/zz_gen_dns_providers.go" ] ||
      { echo "lego's table of DNS providers is not where it was ($lego/providers/dns)"; exit 1; }
    cp -R "$lego" lego
    chmod -R u+w lego
    write_dns_providers lego/providers/dns/zz_gen_dns_providers.go
    rm -f lego/providers/dns/dns_providers_test.go
    printf 'replace %s => ./lego\n' "$LEGO_MODULE" >>go.mod
    GOFLAGS=-mod=mod CGO_ENABLED=0 env "${GO_BUILD_ENV[@]}" nice go build -trimpath -gcflags=all=-dwarf=false \
      -ldflags="-s -w -X $TRAEFIK_MODULE/pkg/version.Version=$TRAEFIK_VERSION" \
      -o "$TRAEFIK.partial" "$TRAEFIK_MODULE/cmd/traefik"
    mv "$TRAEFIK.partial" "$TRAEFIK"
  ) >"$2" 2>&1
}

# The root file system: the binary and the user it runs as; /tmp for Traefik's scratch files.
stage_rootfs() {
  local rootfs=$1
  mkdir -p "$rootfs/usr/local/bin" "$rootfs/etc" "$rootfs/tmp"
  chmod 1777 "$rootfs/tmp"
  install -m 0755 "$TRAEFIK" "$rootfs/usr/local/bin/traefik"
  printf 'root:x:0:0:root:/:/sbin/nologin\ngateway:x:%s:%s:gateway:/:/sbin/nologin\n' \
    "$USER_ID" "$USER_ID" >"$rootfs/etc/passwd"
  printf 'root:x:0:\ngateway:x:%s:\n' "$USER_ID" >"$rootfs/etc/group"
  local version
  version=$("$rootfs/usr/local/bin/traefik" version) || die "the traefik binary does not run"
  [[ "$version" == *"$TRAEFIK_VERSION"* ]] || die "the traefik binary says it is not $TRAEFIK_VERSION: $version"
}

run_config() {
  cat <<CONFIG
{
    "User": "$USER_ID:$USER_ID",
    "Entrypoint": ["/usr/local/bin/traefik"],
    "ExposedPorts": {"$HTTP_PORT/tcp": {}},
$(oci_labels mlkube-gateway "Traefik Proxy $TRAEFIK_VERSION, the Gateway API implementation of the gateway component")
  }
CONFIG
}

if [ "$BINARY_ONLY" = true ]; then
  build_traefik
  exit 0
fi
oci_begin
build_traefik
stage_rootfs "$WORK/rootfs"
oci_image root "$(run_config)"
