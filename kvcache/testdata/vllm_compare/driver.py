"""Drives vLLM v1's KV cache manager (KVCacheManager over its BlockPool)
with the trace of kvcache's BenchmarkStep and BenchmarkPrefixLookup, and
prints the time per scheduler step. See README.md.

    python3 driver.py --vllm /tmp/vllm_bench [--steps 300]
"""

import argparse
import statistics
import sys
import time

sys.dont_write_bytecode = True  # leave no __pycache__ in the repository

import stubs  # noqa: E402

RUNNING, TURNOVER = 256, 8
PROMPT_LEN, SHARED_LEN, BLOCK_SIZE, BLOCKS = 2048, 1024, 16, 32768
WARMUP_STEPS = 2 * ((RUNNING + TURNOVER) // TURNOVER)


def new_manager(num_blocks, max_model_len):
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    import torch

    spec = FullAttentionSpec(block_size=BLOCK_SIZE, num_kv_heads=8, head_size=128, dtype=torch.bfloat16)
    config = KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[],
                           kv_cache_groups=[KVCacheGroupSpec(layer_names=["layer.0"], kv_cache_spec=spec)])
    return KVCacheManager(config, max_model_len=max_model_len, hash_block_size=BLOCK_SIZE,
                          max_num_batched_tokens=TURNOVER * PROMPT_LEN + RUNNING,
                          enable_caching=True, log_stats=True)


class Trace:
    """The Go benchmark's trace: before a step 264 sequences run; the 8
    oldest finish, the other 256 decode one token, 8 arrive with 2,048-token
    prompts whose first 1,024 tokens are one of 4 shared prompts."""

    def __init__(self, manager, hasher):
        from vllm.v1.request import Request

        self.Request, self.manager, self.hasher = Request, manager, hasher
        self.running, self.next_id, self.n = [], 1, 0
        self.shared = [[1000 * i + j for j in range(SHARED_LEN)] for i in range(4)]
        self.suffix = [100000 + j for j in range(SHARED_LEN, PROMPT_LEN)]
        self.hash_ns = 0

    def step(self):
        m = self.manager
        if len(self.running) >= RUNNING + TURNOVER:
            for req in self.running[:TURNOVER]:
                m.free(req)
            del self.running[:TURNOVER]
            for req in self.running:
                req.append_output_token_ids(7)
                if m.allocate_slots(req, 1) is None:
                    sys.exit(f"step {self.n}: decode of {req.request_id} found no blocks")
                req.num_computed_tokens += 1
        for i in range(TURNOVER):
            prompt = self.shared[(self.n + i) % 4] + self.suffix
            prompt[SHARED_LEN] = self.next_id
            t0 = time.perf_counter_ns()
            req = self.Request(str(self.next_id), prompt, self.hasher)
            self.hash_ns += time.perf_counter_ns() - t0
            blocks, hit = m.get_computed_blocks(req)
            if self.n > 1 and hit != SHARED_LEN:
                sys.exit(f"step {self.n}: hit {hit} tokens, want {SHARED_LEN}")
            if m.allocate_slots(req, PROMPT_LEN - hit, hit, blocks) is None:
                sys.exit(f"step {self.n}: admission found no blocks")
            req.num_computed_tokens = PROMPT_LEN
            self.running.append(req)
            self.next_id += 1
        self.n += 1


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]


def bench_step(steps, hasher):
    t = Trace(new_manager(BLOCKS, PROMPT_LEN + 1024), hasher)
    for _ in range(WARMUP_STEPS):
        t.step()
    t.manager.make_prefix_cache_stats()  # counts from here on
    t.hash_ns, lat = 0, []
    for _ in range(steps):
        t0 = time.perf_counter_ns()
        t.step()
        lat.append(time.perf_counter_ns() - t0)
    us = [x / 1000 for x in lat]
    stats = t.manager.make_prefix_cache_stats()
    print(f"step: {steps} steps, mean {statistics.mean(us):.0f} us, p50 {percentile(us, 0.5):.0f} us, "
          f"p99 {percentile(us, 0.99):.0f} us; request block hashing {t.hash_ns / steps / 1000:.0f} us/step; "
          f"prefix hits {stats.hits} of {stats.queries} queried tokens")


def bench_lookup(reps, hasher):
    from vllm.v1.request import Request

    m = new_manager(4096, 32768 + 16)
    prompt = [i * 7 for i in range(32768)]
    req = Request("warm", prompt, hasher)
    blocks, hit = m.get_computed_blocks(req)
    m.allocate_slots(req, len(prompt) - hit, hit, blocks)
    m.free(req)
    with_hash, lookup = [], []
    for r in range(reps):
        t0 = time.perf_counter_ns()
        req = Request(f"probe{r}", prompt, hasher)
        t1 = time.perf_counter_ns()
        _, hit = m.get_computed_blocks(req)
        t2 = time.perf_counter_ns()
        if hit != len(prompt) - BLOCK_SIZE:
            sys.exit(f"lookup hit {hit}")
        with_hash.append((t2 - t0) / 1000)
        lookup.append((t2 - t1) / 1000)
    print(f"prefix lookup, 32768 tokens: p50 {percentile(lookup, 0.5):.0f} us the lookup of a hashed request, "
          f"p50 {percentile(with_hash, 0.5):.0f} us with the request's block hashing")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vllm", required=True, help="directory prepare.sh filled")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lookups", type=int, default=50)
    args = ap.parse_args()
    stubs.install(args.vllm)
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash

    init_none_hash(sha256)  # vLLM's default prefix_caching_hash_algo, "sha256"
    hasher = get_request_block_hasher(BLOCK_SIZE, sha256)
    print(f"python {sys.version.split()[0]}")
    bench_step(args.steps, hasher)
    bench_lookup(args.lookups, hasher)


if __name__ == "__main__":
    main()
