#!/usr/bin/env bash
# build-cuda.sh: build, with -tags cuda, the binaries the GPU validation runs
# (scripts/gpu-validation.sh): arenactl and the test binaries of the packages
# whose tests take the cuda backend. The GPU machine needs no Go.
#
#   scripts/build-cuda.sh [BIN]   (default .device/bin, which git ignores)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-.device/bin}
mkdir -p "$bin"
eval "$(scripts/cuda-sdk.sh)"
# -s -w: no symbol table or DWARF (stack traces keep their names), so the
# binaries fit the device tool's carry limit together.
go build -tags cuda -ldflags='-s -w' -o "$bin/arenactl" ./examples/arenactl
for pkg in gpuworker tests; do
	go test -tags cuda -ldflags='-s -w' -c -o "$bin/$pkg.test" "./$pkg"
done
ls -l "$bin" >&2
