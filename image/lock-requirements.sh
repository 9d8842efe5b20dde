#!/usr/bin/env bash
# Pins everything an image's Python packages need. A requirements file under image/ has two
# parts: the packages the image is for, pinned by hand, then a line starting with
# "# What those need", then every other package they pull in. This resolves the first part
# again, with pip, for the image's Python (image/debian.sh) and rewrites the second. A pin of the
# first part marked "# no-deps: WHY" is kept as it is and left out of the resolution
# (image/debian.sh installs it without its dependencies).
#
#   image/lock-requirements.sh image/training/requirements.txt
#
# Run it after changing a pin of the first part; the image builds install exactly the file's
# pins, without resolving, so a pin left out makes the build fail rather than drift.
set -euo pipefail
# shellcheck source=SCRIPTDIR/oci.sh
source "$(dirname "$0")/oci.sh"
# shellcheck source=SCRIPTDIR/debian.sh
source "$(dirname "$0")/debian.sh"

{ [ $# -eq 1 ] && [ -f "$1" ]; } || die "usage: $0 REQUIREMENTS" "e.g. $0 image/training/requirements.txt"
FILE=$1
MARKER='# What those need'
grep -q "^$MARKER" "$FILE" || die "$FILE has no line starting with \"$MARKER\"" \
  "put that line, as a comment, between the packages the image is for and those they need"

# The header: every line up to the marker and the comment lines that follow it.
HEADER=$(awk -v marker="$MARKER" '
  index($0, marker) == 1 { seen = 1 }
  seen && !/^#/ { exit }
  { print }' "$FILE")
mapfile -t WANTED < <(awk -v marker="$MARKER" -v no_deps="$NO_DEPS_COMMENT" '
  index($0, marker) == 1 { exit }
  !/^[ \t]*(#|$)/ && !index($0, no_deps) { print $1 }' "$FILE")
[ "${#WANTED[@]}" -gt 0 ] || die "$FILE pins no package before \"$MARKER\""

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
say "resolving ${WANTED[*]} for CPython $PYTHON_VERSION"
# shellcheck disable=SC2046 # the flags are words
python3 -m pip install --quiet --disable-pip-version-check --dry-run --ignore-installed \
  --target "$WORK/target" --report "$WORK/report.json" $(python_target_flags) "${WANTED[@]}" ||
  die "pip could not resolve the packages of $FILE" "each needs a wheel for CPython $PYTHON_VERSION on manylinux x86_64"
{
  echo "$HEADER"
  python3 - "$WORK/report.json" "${WANTED[@]}" <<'PYTHON'
import json, re, sys

def name(text):
    return re.sub(r"[-_.]+", "-", text).lower()

report, wanted = sys.argv[1], {name(re.split(r"[=<>!~ ;\[]", w)[0]) for w in sys.argv[2:]}
packages = {(name(p["metadata"]["name"]), p["metadata"]["version"]) for p in json.load(open(report))["install"]}
for package, version in sorted(packages):
    if package not in wanted:
        print(f"{package}=={version}")
PYTHON
} >"$WORK/requirements.txt"
mv "$WORK/requirements.txt" "$FILE"
say "wrote $FILE"
