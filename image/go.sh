# shellcheck shell=bash
# GO_BUILD_ENV, the environment of every Go build of the project (the control plane and the real
# nodes' parts in cluster/, SeaweedFS and Traefik in image/): `env "${GO_BUILD_ENV[@]}" go build`.
#
# The compiler's garbage collector stays off until a process holds 3 GiB (GOGC=off with a
# GOMEMLIMIT): a compile is short-lived and mostly ends before that, so it frees nothing it did
# not have to. Measured on the registry built from an empty build cache, 2 cores: 145 and 147
# CPU-seconds with Go's defaults, 123 and 135 without the collector, its largest process 1.3 GB
# instead of 0.6. Several builds at once (two per build, -p 2) stay under 12 GiB. Only the
# builds get it: the programs they build run with Go's defaults.
# shellcheck disable=SC2034 # read by the scripts that source this
GO_BUILD_ENV=(GOGC=off GOMEMLIMIT=3GiB)
