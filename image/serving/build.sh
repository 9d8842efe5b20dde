#!/usr/bin/env bash
# The serving image: Debian bookworm's python3 with the wheels pinned in
# image/serving/requirements.txt (MLServer with its XGBoost, scikit-learn and LightGBM
# runtimes, TensorFlow and XGBoost for the CPU, boto3) in /opt/venv, first on PATH, and
# mlkube's serving package, mlkube_serving (image/serving/mlkube_serving/), in
# /opt/mlkube/serving, on the venv's path: it fetches a model from the object store and serves
# it over the V2 inference protocol (its modules say how). It runs as the user mlkube (uid
# 1000, group users) in /tmp, with HOME=/tmp: a pod's root file system may be read-only.
# image/node-images.sh calls this with the image's name and caches the archive.
#
#   image/serving/build.sh ARCHIVE REF      (as root; e.g. REF docker.io/mlkube/serving:0.1.0)
set -euo pipefail
# shellcheck source=SCRIPTDIR/../oci.sh
source "$(dirname "$0")/../oci.sh"
oci_arguments "$0 ARCHIVE REF" "$@"
# shellcheck source=SCRIPTDIR/../debian.sh
source "$(dirname "$0")/../debian.sh"
cd "$(dirname "$0")/../.."

REQUIREMENTS=image/serving/requirements.txt
PACKAGE=image/serving/mlkube_serving
USER_ID=1000
GROUP_ID=100

# The package's sources in /opt/mlkube/serving, a .pth file putting that on the venv's path, and
# their bytecode written now (hash-checked, as the wheels' is): the image's files are read-only.
install_package() {
  local rootfs=$1 file
  install -d -m 0755 "$rootfs/opt/mlkube/serving/mlkube_serving"
  for file in "$PACKAGE"/*.py; do
    install -m 0644 "$file" "$rootfs/opt/mlkube/serving/mlkube_serving/"
  done
  echo /opt/mlkube/serving >"$rootfs/opt/venv/lib/python$PYTHON_VERSION/site-packages/mlkube-serving.pth"
  in_chroot "$rootfs" /opt/venv/bin/python -m compileall -q --invalidation-mode checked-hash \
    /opt/mlkube/serving >/dev/null || die "mlkube_serving does not compile"
}

# Everything the server needs imports: a wheel that needs a library minbase lacks fails here,
# not in a pod.
check_imports() {
  local rootfs=$1
  say "checking that mlserver, its XGBoost, scikit-learn and LightGBM runtimes, tensorflow, boto3 and mlkube_serving import in the image"
  python_check "$rootfs" "the serving packages do not import in the serving image" '
import boto3, mlserver, mlserver_lightgbm, mlserver_sklearn, mlserver_xgboost, tensorflow
import mlkube_serving.fetch, mlkube_serving.serve, mlkube_serving.tensorflow, mlkube_serving.xgboost'
}

run_config() {
  cat <<CONFIG
{
    "User": "$USER_ID:$GROUP_ID",
    "Env": [
      "PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      "LANG=C.UTF-8",
      "HOME=/tmp",
      "PYTHONUNBUFFERED=1",
      "PYTHONDONTWRITEBYTECODE=1"
    ],
    "WorkingDir": "/tmp",
    "ExposedPorts": {"8080/tcp": {}, "8081/tcp": {}, "8082/tcp": {}},
    "Cmd": ["python3", "-m", "mlkube_serving.serve", "--help"],
$(oci_labels mlkube-serving "MLServer (the V2 inference protocol over REST and gRPC) serving XGBoost models and TensorFlow SavedModels fetched from S3, for the CPU")
  }
CONFIG
}

debian_begin
python_wheels "$REQUIREMENTS"
# libgomp1: LightGBM's library links GCC's OpenMP runtime, which its wheel does not carry.
debian_rootfs "$WORK/rootfs" python3 python3-venv ca-certificates netbase libgomp1
python_venv "$WORK/rootfs" "$REQUIREMENTS"
install_package "$WORK/rootfs"
add_user "$WORK/rootfs" mlkube "$USER_ID" "$GROUP_ID"
check_imports "$WORK/rootfs"
oci_image keep "$(run_config)"
