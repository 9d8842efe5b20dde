# shellcheck shell=bash
# The cluster's image registry: CNCF Distribution's, built from its Go module, in the cluster's
# namespace on $REGISTRY_ADDRESS, its storage kept in the cache per API port; and the pushes of
# the images image/node-images.sh builds, with skopeo, each only when the registry does not hold
# that manifest already. Sourced by cluster/real-node.sh.

REGISTRY_VERSION=v3.1.2
REGISTRY_BIN=$CACHE_ROOT/registry-$REGISTRY_VERSION/bin/registry

build_registry() {
  go_install_once "the registry (CNCF Distribution)" "$REGISTRY_VERSION" \
    github.com/distribution/distribution/v3/cmd/registry "$REGISTRY_BIN" 2
}

# The registry's configuration: listening on ADDRESS, storing under $REGISTRY_ROOT, deletes
# allowed (so that a test can take a tag away), no authentication (it is reachable from the
# cluster's namespaces and the host's loopback only).
write_registry_config() {
  local file=$1 address=$2
  mkdir -p "$REGISTRY_ROOT"
  cat >"$file" <<REGISTRY
version: 0.1
log: {level: warn, formatter: text}
storage:
  filesystem: {rootdirectory: $REGISTRY_ROOT}
  delete: {enabled: true}
http:
  addr: $address
REGISTRY
}

# A port on 127.0.0.1 nothing listens on, above this cluster's own.
free_port() {
  local port
  for port in $(seq $((API_PORT + 10)) $((API_PORT + 200))); do
    [ -n "$(port_owner "$port")" ] || { echo "$port"; return; }
  done
  die "no free port on 127.0.0.1 between $((API_PORT + 10)) and $((API_PORT + 200))"
}

registry_ready() { curl -fsS --max-time 2 "http://$1/v2/" >/dev/null; }

start_registry() {
  write_registry_config "$STATE_DIR/registry.yaml" "$REGISTRY_ADDRESS"
  start_in_netns registry "$REGISTRY_BIN" serve "$STATE_DIR/registry.yaml"
  wait_until "the registry on $REGISTRY_ADDRESS" 30 registry "in_netns curl -fsS --max-time 2 http://$REGISTRY_ADDRESS/v2/"
}

# The digest of the manifest an OCI archive holds.
archive_digest() {
  { tar -xOf "$1" index.json 2>/dev/null || tar -xOf "$1" ./index.json 2>/dev/null || true; } |
    grep -o 'sha256:[0-9a-f]\{64\}' | head -n1 || true
}

# The registry's digest of REF's manifest (REF without its registry), or nothing: REGISTRY REF.
registry_digest() {
  local registry=$1 ref=$2 accept
  accept="application/vnd.oci.image.manifest.v1+json,application/vnd.oci.image.index.v1+json"
  accept="$accept,application/vnd.docker.distribution.manifest.v2+json"
  curl -fsS --max-time 10 -I -H "Accept: $accept" "http://$registry/v2/${ref%:*}/manifests/${ref##*:}" 2>/dev/null |
    awk 'tolower($1) == "docker-content-digest:" {print $2}' | tr -d '\r' || true
}

# Build the node's images (the NAMEs image/node-images.sh takes, or all) and list them, one
# `<ref> <archive>` line each, in $STATE_DIR/images.list.
build_images() {
  local log=$STATE_DIR/images.log
  say "building the node's images (image/node-images.sh; cached after the first time); log: $log"
  with_progress "the node's images" node_images_into "$log" "$@" ||
    die_with_log "building the node's images failed" "$log" 10
}

# image/node-images.sh NAME..., its list into $STATE_DIR/images.list and what it says into LOG.
node_images_into() {
  local log=$1
  shift
  "${MLKUBE_NODE_IMAGES:-$REPO_DIR/image/node-images.sh}" "$@" >"$STATE_DIR/images.list" 2>"$log"
}

# Push every image of $STATE_DIR/images.list that the registry on ADDRESS (reachable from the
# host: its forwarder, or the preload's registry) lacks.
push_images() {
  local address=$1 ref archive path
  while read -r ref archive; do
    [ -n "$ref" ] || continue
    path=${ref#docker.io/}
    [ "$(registry_digest "$address" "$path")" != "$(archive_digest "$archive")" ] || continue
    say "pushing $ref to the registry ($(($(stat -c %s "$archive") / 1024 / 1024)) MiB)"
    skopeo copy --quiet --dest-tls-verify=false "oci-archive:$archive" "docker://$address/$path" \
      >>"$STATE_DIR/images.log" 2>&1 || die_with_log "pushing $ref to the registry failed" "$STATE_DIR/images.log" 8
  done <"$STATE_DIR/images.list"
}
