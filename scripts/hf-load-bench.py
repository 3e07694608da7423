#!/usr/bin/env python3
"""hf-load-bench.py: the loaders users pick today, on the checkpoint in a
model folder, for the weights-load comparison of scripts/load-bench.sh.

    python3 scripts/hf-load-bench.py MODEL_DIR [REPEATS]

Times, from the page cache to cuda:0, every shard of the folder with
  - load_file: safetensors.torch.load_file(f, device="cuda:0")
  - safe_open: safe_open(f, "pt") then get_tensor(k).to("cuda:0") per tensor
keeping every tensor until the whole checkpoint is loaded (as a model load
does), with torch.cuda.synchronize() before the clock stops. The CUDA
context is made before the first run. Prints one JSON object: the tensor
bytes, and per loader every run's seconds and the best and median GB/s
(10^9 B/s).
"""
import glob
import json
import os
import statistics
import sys
import time

import torch
from safetensors import safe_open
from safetensors.torch import load_file


def load_with_load_file(files):
    out = {}
    for f in files:
        out.update(load_file(f, device="cuda:0"))
    return out


def load_with_safe_open(files):
    out = {}
    for f in files:
        with safe_open(f, framework="pt", device="cpu") as g:
            for k in g.keys():
                out[k] = g.get_tensor(k).to("cuda:0")
    return out


def main():
    folder = sys.argv[1]
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    files = sorted(glob.glob(os.path.join(folder, "*.safetensors")))
    if not files:
        sys.exit(f"no .safetensors files in {folder}")
    torch.zeros(1, device="cuda:0")
    torch.cuda.synchronize()
    report = {"files": len(files), "torch": torch.__version__}
    for name, fn in (("load_file", load_with_load_file), ("safe_open", load_with_safe_open)):
        runs = []
        for _ in range(repeats):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            tensors = fn(files)
            torch.cuda.synchronize()
            runs.append(time.perf_counter() - t0)
            nbytes = sum(t.numel() * t.element_size() for t in tensors.values())
            del tensors
            torch.cuda.empty_cache()
        report["tensor_bytes"] = nbytes
        report[name] = {
            "seconds": [round(s, 4) for s in runs],
            "best_gbps": round(nbytes / min(runs) / 1e9, 2),
            "median_gbps": round(nbytes / statistics.median(runs) / 1e9, 2),
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
