// Package serving is the example programs' serving loop over gpuarena's KV
// cache: a trace of requests (Generate, a seeded synthetic one; Load, a
// JSON file) and a continuous-batching scheduler with chunked prefill,
// Live, in the manner of vLLM's v1 scheduler (vllm/v1/core/sched/
// scheduler.py): each step, under a budget of max_batch_tokens tokens, one
// token for every decoding sequence first, then a chunk of each prompt
// still being prefilled, then admissions while the block pool and
// max_batch_size allow; finished sequences are freed and the newest one
// is preempted by recompute when the pool is exhausted. A request may be
// as long as max_seq_len whatever max_batch_tokens is. Scheduler serves a
// trace through Live. It drives any KV (the gpuarena.Manager's KV cache
// actor, or a kvcache.Pool directly in tests) and keeps no device state of
// its own.
package serving
