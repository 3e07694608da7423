#!/bin/sh
# prepare.sh VLLM_GIT_DIR DEST: copies the vLLM files the driver runs, at
# the commit the comparison used, from a vLLM git checkout (or bare
# clone) into DEST, outside this repository. Nothing is installed.
set -eu
commit=9aaf83ef502fc37bc647f6e474314d48ba36cd1c
src=$1
dest=$2
for f in \
	vllm/v1/core/block_pool.py \
	vllm/v1/core/kv_cache_utils.py \
	vllm/v1/core/single_type_kv_cache_manager.py \
	vllm/v1/core/kv_cache_manager.py \
	vllm/v1/core/kv_cache_coordinator.py \
	vllm/v1/core/kv_cache_metrics.py \
	vllm/v1/kv_cache_interface.py \
	vllm/utils/hashing.py \
	vllm/utils/math_utils.py; do
	mkdir -p "$dest/$(dirname "$f")"
	git -C "$src" show "$commit:$f" >"$dest/$f"
done
echo "vLLM $commit files in $dest"
