# shellcheck shell=bash
# with_progress, sourced by scripts whose steps may take long (image/oci.sh, and so every image
# script; cluster/local-cluster.sh; cluster/quickstart.sh); it speaks through the caller's `say`.

# Run a command that may take long, saying every minute that it still runs and for how long,
# so a first build (the static binary, 10 minutes or more on 2 cores) is never silent.
with_progress() {
  local what=$1 started=$SECONDS status
  shift
  (
    # sleep holds none of the caller's pipes, so killing the loop lets them close at once. The
    # loop also ends once the script is gone ($$ is its process), should the command exit it.
    # shellcheck disable=SC2217 # stdin redirected too, for that reason
    while sleep 60 </dev/null >/dev/null 2>&1 && kill -0 "$$" 2>/dev/null; do
      say "$what: still running ($(((SECONDS - started) / 60)) min so far)"
    done
  ) &
  local ticker=$!
  "$@" && status=0 || status=$?
  kill "$ticker" 2>/dev/null
  wait "$ticker" 2>/dev/null || true
  return "$status"
}
