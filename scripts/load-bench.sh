#!/usr/bin/env bash
# load-bench.sh: the weights-load comparison of docs/gpu-validation.md, on a
# machine with an NVIDIA GPU, its driver, and PyTorch with safetensors (for
# the Hugging Face loaders), but no Go. It runs binaries built elsewhere
# with -tags cuda (scripts/build-cuda.sh) from BIN and writes one file per
# step to OUTDIR:
#
#   gen-model.txt    arenactl gen-model: a Llama-3.1-8B-shaped checkpoint
#                    (32 layers, 16,060,522,496 B in 4 shards) in MODEL_DIR
#   upload-bench.txt BenchmarkCUDAWeightsUpload: the link (pinned and
#                    pageable), the input (pread and mmap, 1/4/8 readers) and
#                    LoadWeights (readers × chunk size), in MB/s
#   hf-load.json     scripts/hf-load-bench.py: safetensors load_file and
#                    safe_open + .to("cuda")
#   run-model.json   arenactl run --model: load, build, steps, release,
#                    invariants
#
#   scripts/load-bench.sh BIN OUTDIR [MODEL_DIR]   (default /tmp/gpuarena-llama-3.1-8b)
set -uo pipefail
bin=$(realpath "${1:?usage: load-bench.sh BIN OUTDIR [MODEL_DIR]}")
mkdir -p "${2:?usage: load-bench.sh BIN OUTDIR [MODEL_DIR]}"
out=$(realpath "$2")
model=${3:-/tmp/gpuarena-llama-3.1-8b}
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

[ -f "$model/model.safetensors.index.json" ] ||
	step gen-model.txt "$bin/arenactl" gen-model --config examples/configs/llama-3.1-8b.json --out "$model" --seed 1
cat "$model"/*.safetensors >/dev/null # into the page cache
(cd gpuworker && step upload-bench.txt "$bin/gpuworker.test" -test.run '^$' -test.bench CUDAWeightsUpload \
	-test.benchtime 3x -gpuarena.model "$model") || status=1
step hf-load.json python3 scripts/hf-load-bench.py "$model" 3
step run-model.json "$bin/arenactl" run --backend cuda --json --model "$model" --steps 50
exit $status
