#!/usr/bin/env bash
# The notebook-hub image, which is also the notebook image: Debian bookworm's python3 with
# JupyterHub, KubeSpawner and JupyterLab (image/notebook-hub/requirements.txt) in /opt/venv,
# first on PATH, and configurable-http-proxy (image/notebook-hub/package.json, installed with
# the host's npm from its lock file) run by Debian's nodejs. The hub component runs `jupyterhub`
# and `configurable-http-proxy` from it; KubeSpawner runs `jupyterhub-singleuser`, the default
# command, as the user jovyan (uid 1000, group users), whose home /home/jovyan it owns.
# image/node-images.sh calls this with the image's name and caches the archive.
#
#   image/notebook-hub/build.sh ARCHIVE REF   (as root; e.g. REF docker.io/mlkube/notebook-hub:0.1.0)
set -euo pipefail
# shellcheck source=SCRIPTDIR/../oci.sh
source "$(dirname "$0")/../oci.sh"
oci_arguments "$0 ARCHIVE REF" "$@"
# shellcheck source=SCRIPTDIR/../debian.sh
source "$(dirname "$0")/../debian.sh"
cd "$(dirname "$0")/../.."

REQUIREMENTS=image/notebook-hub/requirements.txt
PROXY=/opt/configurable-http-proxy
USER_ID=1000
GROUP_ID=100
HUB_PORT=8081
PROXY_PORT=8000
NOTEBOOK_PORT=8888

# configurable-http-proxy and its dependencies (plain JavaScript) as the lock file pins them,
# installed by the host's npm into a directory of their own; its cache keeps the tarballs.
proxy_modules() {
  local dir=$1
  command -v npm >/dev/null || die "npm is not on PATH; it installs configurable-http-proxy" "apt-get install npm"
  say "installing configurable-http-proxy (npm ci, cached)"
  mkdir -p "$dir"
  cp image/notebook-hub/package.json image/notebook-hub/package-lock.json "$dir/"
  (cd "$dir" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --prefer-offline \
    --loglevel=error --cache "$DOWNLOADS/npm") >&2 ||
    die "npm could not install configurable-http-proxy" "check image/notebook-hub/package-lock.json"
}

install_proxy() {
  local rootfs=$1 modules=$2
  mkdir -p "$rootfs$PROXY"
  mv "$modules"/* "$rootfs$PROXY/"
  chown -R 0:0 "$rootfs$PROXY"
  chmod -R u=rwX,go=rX "$rootfs$PROXY"
  ln -s "$PROXY/node_modules/configurable-http-proxy/bin/configurable-http-proxy" \
    "$rootfs/usr/local/bin/configurable-http-proxy"
}

# The hub's working directory, where the component mounts its state; owned by the user so that
# the image also runs without that volume.
hub_directory() {
  local rootfs=$1
  install -d -m 0755 -o "$USER_ID" -g "$GROUP_ID" "$rootfs/srv/jupyterhub"
}

check_commands() {
  local rootfs=$1 command
  say "checking that the hub, the proxy and the notebook server run in the image"
  for command in "jupyterhub --version" "configurable-http-proxy --version" \
    "jupyterhub-singleuser --version" "jupyter lab --version"; do
    # shellcheck disable=SC2086 # the command is words
    in_chroot "$rootfs" /usr/bin/env PATH="/opt/venv/bin:/usr/local/bin:/usr/bin:/bin" \
      HOME=/tmp/check PYTHONDONTWRITEBYTECODE=1 $command >/dev/null ||
      die "\`$command\` fails in the notebook-hub image"
  done
  rm -rf "${rootfs:?}/tmp/"*
}

run_config() {
  cat <<CONFIG
{
    "User": "$USER_ID:$GROUP_ID",
    "Env": [
      "PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      "LANG=C.UTF-8",
      "SHELL=/bin/bash",
      "PYTHONUNBUFFERED=1"
    ],
    "WorkingDir": "/home/jovyan",
    "Cmd": ["jupyterhub-singleuser"],
    "ExposedPorts": {"$PROXY_PORT/tcp": {}, "$HUB_PORT/tcp": {}, "$NOTEBOOK_PORT/tcp": {}},
$(oci_labels mlkube-notebook-hub "JupyterHub with KubeSpawner and configurable-http-proxy; JupyterLab for users' notebooks")
  }
CONFIG
}

debian_begin
python_wheels "$REQUIREMENTS"
proxy_modules "$WORK/proxy"
debian_rootfs "$WORK/rootfs" python3 python3-venv ca-certificates netbase nodejs
python_venv "$WORK/rootfs" "$REQUIREMENTS"
install_proxy "$WORK/rootfs" "$WORK/proxy"
add_user "$WORK/rootfs" jovyan "$USER_ID" "$GROUP_ID"
hub_directory "$WORK/rootfs"
check_commands "$WORK/rootfs"
oci_image keep "$(run_config)"
