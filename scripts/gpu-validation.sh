#!/usr/bin/env bash
# gpu-validation.sh: the GPU validation run of docs/gpu-validation.md, on a
# machine with an NVIDIA GPU and driver but no Go. It runs binaries built
# elsewhere with -tags cuda (scripts/build-cuda.sh) from BIN, and writes one
# log or JSON file per step to OUTDIR.
#
#   scripts/gpu-validation.sh BIN OUTDIR
set -uo pipefail
bin=$(realpath "${1:?usage: gpu-validation.sh BIN OUTDIR}")
mkdir -p "${2:?usage: gpu-validation.sh BIN OUTDIR}"
out=$(realpath "$2")
cd "$(dirname "$0")/.."
status=0
step() { # step NAME CMD...: run CMD, log to OUTDIR/NAME, remember a failure
	local name=$1; shift
	echo "== $name: $*"
	if ! "$@" >"$out/$name" 2>&1; then
		echo "   FAILED (exit $?)"; status=1; tail -n 3 "$out/$name"; return 1
	fi
	tail -n 3 "$out/$name"
}

nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv >"$out/nvidia-smi.csv" 2>&1
step devices.txt "$bin/arenactl" devices --backend cuda
# The conformance suite and the package tests that take a backend, each run
# in its package's folder as go test would (the binaries scripts/build-cuda.sh
# builds; other files in BIN are left alone).
for pkg in gpuworker tests; do
	(cd "$pkg" && step "$pkg-test.log" "$bin/$pkg.test" -test.v -test.count=1 -test.timeout=300s) || status=1
done
# The README's main job: a generated Qwen3-0.6B loaded, the arena and the KV
# cache built, a trace served with the kernels in every step, released.
step run-main-job.json "$bin/arenactl" run --backend cuda --json
# The arena alone on the three models at three batch sizes.
for cfg in qwen3-next-80b-a3b-thinking deepseek-v3 llama-3.1-8b; do
	for m in 512 8192 32768; do
		step "run-$cfg-$m.json" "$bin/arenactl" run --backend cuda --json \
			--config "examples/configs/$cfg.json" --max-batch-tokens "$m" --steps 200 --clients 16
	done
done
# The benchmark tables of docs/performance.md, on the GPU: dispatch,
# contention, arena build and slab carve against the peers.
step bench.txt "$bin/arenactl" bench --backend cuda
exit $status
