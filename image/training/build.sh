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
# shellcheck source=SCRIPTDIR/../oci.sh
source "$(dirname "$0")/../oci.sh"
oci_arguments "$0 ARCHIVE REF" "$@"
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
  python_check "$rootfs" "the frameworks do not import in the training image" \
    'import tensorflow, jax, sklearn, xgboost, mpi4py, sklearn.datasets as d; d.load_digits()'
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
$(oci_labels mlkube-training "Python 3 with TensorFlow, JAX, scikit-learn and XGBoost for the CPU, Open MPI with mpi4py, and mlkube's training examples")
  }
CONFIG
}

debian_begin
python_wheels "$REQUIREMENTS"
debian_rootfs "$WORK/rootfs" python3 python3-venv ca-certificates netbase openmpi-bin python3-mpi4py
python_venv "$WORK/rootfs" "$REQUIREMENTS"
venv_sees_debian_packages "$WORK/rootfs"
add_user "$WORK/rootfs" mlkube "$USER_ID" "$GROUP_ID"
copy_examples "$WORK/rootfs"
check_imports "$WORK/rootfs"
oci_image keep "$(run_config)"
