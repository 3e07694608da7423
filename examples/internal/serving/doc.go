// Package serving is the example programs' serving loop over gpuarena's KV
// cache: a trace of requests (Generate, a seeded synthetic one; Load, a
// JSON file) and a continuous-batching Scheduler that admits them while the
// block pool allows, appends one token per running sequence each step,
// frees finished sequences and preempts the newest one when the pool is
// exhausted, in the manner of vLLM's v1 scheduler (vllm/v1/core/sched/
// scheduler.py), without chunked prefill. It drives any KV (the
// gpuarena.Manager's KV cache actor, or a kvcache.Pool directly in tests)
// and keeps no device state of its own.
package serving
