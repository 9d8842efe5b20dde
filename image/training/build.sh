#!/usr/bin/env bash
# The training image: Debian bookworm's python3 with the wheels pinned in
# image/training/requirements.txt (TensorFlow, JAX, scikit-learn with its bundled data sets,
# XGBoost, all for the CPU) in /opt/venv, first on PATH, Debian's Open MPI (mpirun, orted) and
# mpi4py, which the venv sees too, and the example training scripts of examples/training/ in
# /opt/mlkube/examples/. It runs as the user mlkube (uid 1000, group users) in /tmp; its default
# command is python3. image/node-images.sh calls this with the image's name and caches the
# archive.
#
#   image/training/build.sh ARCHIVE REF      (as root; e.g. REF docker.io/mlkube/training:0.1.0)
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 ARCHIVE REF" >&2; exit 2; }
ARCHIVE=$(realpath -m "$1")
REF=$2
# shellcheck source=SCRIPTDIR/../oci.sh
source "$(dirname "$0")/../oci.sh"
# shellcheck source=SCRIPTDIR/../debian.sh
source "$(dirname "$0")/../debian.sh"
cd "$(dirname "$0")/../.."

REQUIREMENTS=image/training/requirements.txt
USER_ID=1000
GROUP_ID=100

# The examples, in the image where the TFJob and JAXJob manifests expect them; whatever
# examples/training/ holds when the image is built.
copy_examples() {
  local rootfs=$1 script
  install -d -m 0755 "$rootfs/opt/mlkube/examples"
  for script in examples/training/*.py; do
    [ -f "$script" ] || continue
    install -m 0644 "$script" "$rootfs/opt/mlkube/examples/"
  done
}

# Debian's mpi4py, built against the image's Open MPI, in the venv too: Debian's packages come
# after the venv's on sys.path, so they never shadow the pinned wheels.
venv_sees_debian_packages() {
  local rootfs=$1
  echo /usr/lib/python3/dist-packages \
    >"$rootfs/opt/venv/lib/python$PYTHON_VERSION/site-packages/debian-dist-packages.pth"
}

# Every framework imports: a wheel that needs a library minbase lacks fails here, not in a pod.
check_imports() {
  local rootfs=$1
  say "checking that tensorflow, jax, sklearn, xgboost and mpi4py import in the image"
  mkdir -p "$rootfs/tmp/check"
  # TensorFlow logs to stderr as it loads: shown only when the import fails.
  in_chroot "$rootfs" /usr/bin/env HOME=/tmp/check PYTHONDONTWRITEBYTECODE=1 \
    /opt/venv/bin/python -c 'import tensorflow, jax, sklearn, xgboost, mpi4py, sklearn.datasets as d; d.load_digits()' \
    >"$WORK/check.log" 2>&1 || {
    cat "$WORK/check.log" >&2
    die "the frameworks do not import in the training image" "the output above says which one and why"
  }
  rm -rf "${rootfs:?}/tmp/"*
}

run_config() {
  cat <<CONFIG
{
    "User": "$USER_ID:$GROUP_ID",
    "Env": [
      "PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      "LANG=C.UTF-8",
      "PYTHONUNBUFFERED=1"
    ],
    "WorkingDir": "/tmp",
    "Cmd": ["python3"],
    "Labels": {
      "org.opencontainers.image.title": "mlkube-training",
      "org.opencontainers.image.version": "${REF##*:}",
      "org.opencontainers.image.description": "Python 3 with TensorFlow, JAX, scikit-learn and XGBoost for the CPU, Open MPI with mpi4py, and mlkube's training examples"
    }
  }
CONFIG
}

debian_require_tools
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
WORK=$(debian_workdir)
trap 'debian_remove_workdir "$WORK"' EXIT
python_wheels "$REQUIREMENTS"
debian_rootfs "$WORK/rootfs" python3 python3-venv ca-certificates netbase openmpi-bin python3-mpi4py
python_venv "$WORK/rootfs" "$REQUIREMENTS"
venv_sees_debian_packages "$WORK/rootfs"
add_user "$WORK/rootfs" mlkube "$USER_ID" "$GROUP_ID"
copy_examples "$WORK/rootfs"
check_imports "$WORK/rootfs"
say "packing the layer"
oci_layer "$WORK/rootfs" "$WORK/layer.tar"
oci_archive "$ARCHIVE" "$REF" "$(run_config)" "$WORK/layer.tar"
