# shellcheck shell=bash
# Debian bookworm root file systems for the Python images (the training and notebook-hub
# images), sourced by their build scripts after image/oci.sh. Nothing here talks to a container
# registry: Debian's packages come from the mirrors the host's apt uses, Python's from wheels.
#
#   debian_rootfs ROOTFS PACKAGES...      minbase + PACKAGES, with mmdebstrap
#   python_wheels REQUIREMENTS            every pinned wheel, downloaded for the image's Python
#   python_venv ROOTFS REQUIREMENTS       /opt/venv in ROOTFS with those wheels, no index
#   add_user ROOTFS NAME UID GID          a user with a home of its own under /home
#   python_check ROOTFS MESSAGE CODE      CODE runs in the venv, or the build fails
#   debian_begin                          oci_begin of a Debian image (image/oci.sh)
#
# Downloads are kept under $MLKUBE_CACHE/images/downloads (apt's .deb files, the wheelhouse,
# npm's cache), so a rebuild fetches only what changed; they may be deleted at any time. Needs
# root: mmdebstrap builds in root mode and packages are installed with chroot.

SUITE=bookworm
# Bookworm's python3 and C library: the wheels are chosen for them.
PYTHON_VERSION=3.11
GLIBC_MINOR=36
IMAGES_CACHE=${MLKUBE_CACHE:-$HOME/.cache/mlkube}/images
# Layers of GBs: zstd writes them in a third of gzip's time, a fifth smaller (image/oci.sh).
# shellcheck disable=SC2034 # read by image/oci.sh's functions
OCI_COMPRESSION=zstd
DOWNLOADS=$IMAGES_CACHE/downloads
# A pin whose line ends in this comment (and why) is installed without its dependencies, and
# image/lock-requirements.sh leaves it out of the resolution: for a package requiring a
# distribution that another pin provides under another name (the serving image's
# mlserver-xgboost requires xgboost, the CUDA build; xgboost-cpu is the same module). Its other
# dependencies are pinned like any package's.
NO_DEPS_COMMENT='# no-deps:'

debian_require_tools() {
  [ "$(id -u)" -eq 0 ] ||
    die "the Debian-based images are built as root (mmdebstrap in root mode, chroot)" \
      "run it as root, e.g. sudo -E $0"
  command -v mmdebstrap >/dev/null ||
    die "mmdebstrap is not on PATH; it builds the Debian root file system" "apt-get install mmdebstrap"
  python3 -m pip --version >/dev/null 2>&1 ||
    die "python3 -m pip does not run; pip downloads the image's wheels" "apt-get install python3-pip"
  oci_require_tools
}

# The tools checked, SOURCE_DATE_EPOCH exported (the last commit's time unless the caller set
# it), and WORK, a scratch directory removed when the script exits.
debian_begin() {
  debian_require_tools
  export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
  WORK=$(debian_workdir)
  trap 'debian_remove_workdir "$WORK"' EXIT
}

# A scratch directory for one build, on the cache's file system (root file systems take GBs,
# and wheels are hard-linked from the wheelhouse into them).
debian_workdir() {
  local dir
  mkdir -p "$IMAGES_CACHE"
  dir=$(mktemp -d "$IMAGES_CACHE/work.XXXXXX")
  # apt downloads as its own user, which must reach the root file system inside.
  chmod 0755 "$dir"
  echo "$dir"
}

# Removes a scratch directory without ever crossing into a file system mounted below it, should
# an interrupted mmdebstrap have left its /proc or /dev mounts behind.
debian_remove_workdir() {
  [ -n "${1:-}" ] && [ -d "$1" ] || return 0
  rm -rf --one-file-system "$1" ||
    say "warning: could not remove all of $1 (is something still mounted below it?)"
}

# The host's apt sources for bookworm, its updates and security, into DIR/host.list (one-line
# entries) and DIR/host.sources (deb822 stanzas), whichever the host has; other suites and
# third-party repositories are left out. MLKUBE_DEBIAN_SOURCES names a .list or .sources file
# to use instead.
debian_sources() {
  local dir=$1 file
  rm -f "$dir"/host.*
  if [ -n "${MLKUBE_DEBIAN_SOURCES:-}" ]; then
    [ -f "$MLKUBE_DEBIAN_SOURCES" ] || die "MLKUBE_DEBIAN_SOURCES names $MLKUBE_DEBIAN_SOURCES, which is not a file" \
      "unset it to use the host's apt sources"
    case $MLKUBE_DEBIAN_SOURCES in
      *.list | *.sources) cp "$MLKUBE_DEBIAN_SOURCES" "$dir/host.${MLKUBE_DEBIAN_SOURCES##*.}" ;;
      *) die "MLKUBE_DEBIAN_SOURCES is $MLKUBE_DEBIAN_SOURCES" \
        "name a file ending in .list (one-line entries) or .sources (deb822)" ;;
    esac
  else
    for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
      if [ -f "$file" ]; then debian_list_entries "$file"; fi
    done >"$dir/host.list"
    for file in /etc/apt/sources.list.d/*.sources; do
      if [ -f "$file" ]; then debian_deb822_entries "$file"; fi
    done >"$dir/host.sources"
  fi
  find "$dir" -maxdepth 1 -name 'host.*' -empty -delete
  compgen -G "$dir/host.*" >/dev/null ||
    die "the host's apt sources have no entry for Debian $SUITE" \
      "add one to /etc/apt/sources.list.d/, or set MLKUBE_DEBIAN_SOURCES to a sources file for $SUITE"
}

# The one-line entries of FILE for the suite, its updates or security.
debian_list_entries() {
  awk -v suite="^$SUITE(-updates|-security)?\$" '
    /^[ \t]*deb[ \t]/ { for (i = 2; i <= NF; i++) if ($i ~ suite) { print; next } }' "$1"
}

# The enabled deb822 stanzas of FILE whose Suites name the suite, its updates or security.
debian_deb822_entries() {
  awk -v RS= -v ORS='\n\n' -v suite="^$SUITE(-updates|-security)?\$" '
    /(^|\n)[Ee]nabled:[ \t]*no/ { next }
    match($0, /(^|\n)Suites:[^\n]*/) {
      n = split(substr($0, RSTART, RLENGTH), words, /[ \t\n]+/)
      for (i = 1; i <= n; i++) if (words[i] ~ suite) { print; next }
    }' "$1"
}

# ROOTFS: Debian's minbase variant (essential packages and apt) with PACKAGES, their
# recommendations left out. apt's downloads are synced in from the cache before and out after.
debian_rootfs() {
  local rootfs=$1
  shift
  local sources=$rootfs.sources packages
  packages=$(IFS=, && echo "$*")
  mkdir -p "$DOWNLOADS/apt" "$sources"
  debian_sources "$sources"
  say "building the Debian $SUITE root file system (mmdebstrap: minbase, $packages)"
  # shellcheck disable=SC2016 # mmdebstrap's hooks expand $1 (the root file system) themselves
  mmdebstrap --mode=root --variant=minbase --include="$packages" \
    --skip=essential/unlink \
    --setup-hook='mkdir -p "$1/var/cache/apt/archives"' \
    --setup-hook="sync-in $DOWNLOADS/apt /var/cache/apt/archives/" \
    --customize-hook="sync-out /var/cache/apt/archives $DOWNLOADS/apt" \
    --customize-hook='rm -f "$1/etc/resolv.conf" "$1/etc/hostname"' \
    --customize-hook='install -m 0644 /dev/null "$1/etc/resolv.conf"' \
    --customize-hook='install -m 0644 /dev/null "$1/etc/hostname"' \
    "$SUITE" "$rootfs" "$sources"/host.* ||
    die "mmdebstrap could not build the Debian $SUITE root file system" \
      "check that the host's apt sources for $SUITE work: apt-get update"
  rm -rf "$sources"
  apt_state_made_anew "$rootfs"
}

# apt's locks and download directories carry the times of the cache they were synced with and
# the owner apt's sandbox had or lacked: made anew, root's, so that two builds are the same.
apt_state_made_anew() {
  local rootfs=$1 dir
  for dir in var/cache/apt/archives var/lib/apt/lists; do
    rm -rf "${rootfs:?}/$dir/lock" "${rootfs:?}/$dir/partial"
    install -m 0640 /dev/null "$rootfs/$dir/lock"
    install -d -m 0700 "$rootfs/$dir/partial"
  done
}

# pip's flags for wheels that run on the image's CPython on x86_64 Linux with glibc 2.$GLIBC_MINOR.
python_target_flags() {
  local minor
  echo --only-binary=:all: --python-version "$PYTHON_VERSION" --implementation cp \
    --abi "cp${PYTHON_VERSION/./}" --platform manylinux2014_x86_64 --platform manylinux2010_x86_64 \
    --platform manylinux1_x86_64
  for minor in $(seq 5 "$GLIBC_MINOR"); do echo --platform "manylinux_2_${minor}_x86_64"; done
}

# Every wheel REQUIREMENTS pins, into the wheelhouse. Pins are complete, so no dependency is
# resolved here: a package missing from the list fails at install time instead of drifting in.
python_wheels() {
  local requirements=$1
  say "downloading the wheels of $requirements (pip download, cached)"
  # shellcheck disable=SC2046 # the flags are words
  python3 -m pip download --quiet --disable-pip-version-check --no-deps $(python_target_flags) \
    --no-cache-dir --dest "$DOWNLOADS/wheels" --requirement "$requirements" >&2 ||
    die "pip could not download the wheels of $requirements" \
      "each pin must have a wheel for CPython $PYTHON_VERSION on manylinux x86_64"
}

# /opt/venv in ROOTFS, made by the image's own python3, with the wheels of REQUIREMENTS
# installed from the wheelhouse (hard-linked into the root file system for the install). With
# SOURCE_DATE_EPOCH set, Python writes hash-checked .pyc files; Debian's own are rewritten so
# too, since the layer's clamped mtimes would make timestamp-checked ones look stale.
python_venv() {
  local rootfs=$1 requirements=$2
  say "installing $requirements into /opt/venv (pip install --no-index, in a chroot)"
  mkdir -p "$rootfs/tmp/wheels"
  cp -l "$DOWNLOADS/wheels/"* "$rootfs/tmp/wheels/" 2>/dev/null || cp "$DOWNLOADS/wheels/"* "$rootfs/tmp/wheels/"
  grep -v -F -e "$NO_DEPS_COMMENT" "$requirements" >"$rootfs/tmp/wheels/requirements.txt" || true
  grep -F -e "$NO_DEPS_COMMENT" "$requirements" >"$rootfs/tmp/wheels/no-deps.txt" || true
  in_chroot "$rootfs" python3 -m venv /opt/venv
  in_chroot "$rootfs" /opt/venv/bin/python -m pip install --quiet --no-index --no-cache-dir \
    --disable-pip-version-check --find-links /tmp/wheels --requirement /tmp/wheels/requirements.txt >&2 ||
    die "pip could not install $requirements in the image" \
      "every package the pins need must be pinned too: image/lock-requirements.sh $requirements"
  if [ -s "$rootfs/tmp/wheels/no-deps.txt" ]; then
    in_chroot "$rootfs" /opt/venv/bin/python -m pip install --quiet --no-index --no-cache-dir --no-deps \
      --disable-pip-version-check --find-links /tmp/wheels --requirement /tmp/wheels/no-deps.txt >&2 ||
      die "pip could not install the pins of $requirements marked \"$NO_DEPS_COMMENT\"" "each needs its wheel"
  fi
  rm -rf "$rootfs/tmp/wheels"
  in_chroot "$rootfs" python3 -m compileall -q -f --invalidation-mode checked-hash \
    "/usr/lib/python$PYTHON_VERSION" /usr/lib/python3/dist-packages >/dev/null ||
    say "warning: some of Debian's Python modules did not compile; Python compiles them as they load"
}

# Python CODE run by ROOTFS's venv, with a scratch home that is removed after, else MESSAGE and
# the output (TensorFlow logs to stderr as it loads: shown only when the check fails).
python_check() {
  local rootfs=$1 message=$2 code=$3
  mkdir -p "$rootfs/tmp/check"
  in_chroot "$rootfs" /usr/bin/env HOME=/tmp/check PYTHONDONTWRITEBYTECODE=1 /opt/venv/bin/python -c "$code" \
    >"$WORK/check.log" 2>&1 || {
    cat "$WORK/check.log" >&2
    die "$message" "the output above says which one and why"
  }
  rm -rf "${rootfs:?}/tmp/"*
}

# A command in ROOTFS with a clean environment: root's PATH and home, no host variables.
in_chroot() {
  local rootfs=$1
  shift
  chroot "$rootfs" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" PIP_NO_INPUT=1 "$@"
}

# A user NAME (UID, primary group GID, which must exist, e.g. 100 for `users`) with the home
# /home/NAME it owns, a shell and no password. Written into the files directly: minbase has no
# useradd.
add_user() {
  local rootfs=$1 name=$2 uid=$3 gid=$4
  grep -q "^[^:]*:[^:]*:$gid:" "$rootfs/etc/group" || die "group $gid is not in the image's /etc/group"
  echo "$name:x:$uid:$gid::/home/$name:/bin/bash" >>"$rootfs/etc/passwd"
  echo "$name:*:$((SOURCE_DATE_EPOCH / 86400)):0:99999:7:::" >>"$rootfs/etc/shadow"
  mkdir -p "$rootfs/home/$name"
  cp -rT "$rootfs/etc/skel" "$rootfs/home/$name"
  chown -R "$uid:$gid" "$rootfs/home/$name"
  chmod 0755 "$rootfs/home/$name"
}
