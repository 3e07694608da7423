package arena

import "fmt"

// SamplerWarmup is sampler_warmup: which of vLLM's sampler passes over
// [num_reqs, vocab] the fit counts beside the arena, where num_reqs =
// min(max_batch_size, max_batch_tokens) (vLLM's min(max_num_seqs,
// max_num_batched_tokens): vllm/v1/worker/gpu_model_runner.py _dummy_run
// gives the profile min(num_tokens, max_num_seqs) requests, and
// vllm/v1/worker/gpu_worker.py Worker.compile_or_warm_up_model warms the
// sampler up with min(max_num_seqs, max_num_batched_tokens)).
//
// vLLM's V1 engine runs the sampler twice at start-up with dummy
// requests at temperature 0.5, top-p 0.9 and top-k vocab − 1
// (GPUModelRunner._dummy_sampler_run): once in GPUModelRunner.profile_run,
// right after the profiling forward, so that its peak is part of the torch
// peak Worker.determine_available_memory takes out of the budget; and
// again in Worker.compile_or_warm_up_model, after the KV cache has been
// sized and allocated and after the CUDA graphs have been captured. How
// many bytes a pass holds depends on the top-k/top-p implementation,
// hence two values, one per vLLM era.
//
// Under either vLLM value the fit also places the reserve where vLLM's
// start-up has it: the CUDA context exists before the start-up memory
// snapshot (Worker.init_device) and vLLM does not take it out of its
// budget, so the reserve must fit in the memory outside the budget, free
// − budget, instead of coming out of it. The reserve stands for the CUDA
// graphs too unless FitOptions.CUDAGraphs sizes them (CUDAGraphs).
type SamplerWarmup string

// The sampler_warmup values; "" is SamplerWarmupNone.
const (
	// SamplerWarmupNone counts no sampler pass and keeps the reserve
	// inside the budget: the arena's logits buffer is all the sampler
	// holds, as in gpuarena's own engine, which samples in the arena and
	// runs no warm-up outside it. The default.
	SamplerWarmupNone SamplerWarmup = "none"
	// SamplerWarmupProfiled is vLLM up to 0.16: top-k/top-p sort the whole
	// vocabulary (vllm/v1/sample/ops/topk_topp_sampler.py
	// apply_top_k_top_p, torch.sort), SamplerSortBytesPerElement bytes per
	// [num_reqs, vocab] element beyond the logits. The profile's peak is
	// the larger of the forward pass and the sampler pass (profile_run
	// runs them one after the other), so the fit counts the pass inside
	// the budget beyond what the arena already holds: max(pass − arena,
	// 0). The warm-up after the KV cache is sized, the same pass, reuses
	// that room.
	SamplerWarmupProfiled SamplerWarmup = "profiled"
	// SamplerWarmupAfterKVCache is vLLM from 0.17: top-k/top-p run in a
	// Triton kernel in place on the F32 logits
	// (vllm/v1/sample/ops/topk_topp_triton.py apply_top_k_top_p_triton,
	// vLLM PR #33538), SamplerTritonBytesPerElement bytes per element
	// beyond the logits. The pass is counted inside the budget as under
	// SamplerWarmupProfiled, and the warm-up in compile_or_warm_up_model,
	// which runs after the KV cache fills the budget and after the CUDA
	// graphs are captured, must also fit outside the budget beside the
	// reserve, or vLLM fails with "CUDA out of memory occurred when
	// warming up sampler".
	SamplerWarmupAfterKVCache SamplerWarmup = "after_kv_cache"
)

// Bytes per [num_reqs, vocab] element of a vLLM sampler pass beyond the
// logits in the model dtype (compute_logits' output, which the arena's
// logits buffer holds and the fit adds to these), at the pass's peak.
const (
	// SamplerSortBytesPerElement is vLLM ≤ 0.16 at torch.sort in
	// apply_top_k_top_p: the F32 copy of the logits (Sampler.forward,
	// logits.to(torch.float32); temperature divides it in place,
	// Sampler.apply_temperature) 4 B, the sorted values F32 4 B and their
	// I64 indices 8 B, and the sort's own scratch for more than 128 rows
	// (PyTorch aten/src/ATen/native/cuda/SortStable.cu segmented_sort_pairs:
	// an I64 reverse-index array, 8 B, and cub's radix-sort alternate key
	// and value buffers, 4 + 8 B): 36 B.
	SamplerSortBytesPerElement = 4 + 4 + 8 + 8 + 4 + 8
	// SamplerTritonBytesPerElement is vLLM ≥ 0.17 in
	// TopKTopPSampler.forward_native: the F32 logits 4 B (masked in place
	// by apply_top_k_top_p_triton), the softmax probabilities F32 4 B and
	// random_sample's exponential noise q (torch.empty_like(probs)) 4 B:
	// 12 B.
	SamplerTritonBytesPerElement = 4 + 4 + 4
)

// ParseSamplerWarmup reads a sampler warm-up: "" and "none" are
// SamplerWarmupNone, "profiled" and "after_kv_cache" the vLLM eras.
// Errors: an *OptionError for "sampler_warmup".
func ParseSamplerWarmup(s string) (SamplerWarmup, error) {
	switch SamplerWarmup(s) {
	case "", SamplerWarmupNone:
		return SamplerWarmupNone, nil
	case SamplerWarmupProfiled, SamplerWarmupAfterKVCache:
		return SamplerWarmup(s), nil
	}
	return "", &OptionError{Option: "sampler_warmup", Value: clip(s),
		Reason: `want "none", "profiled" (vLLM ≤ 0.16) or "after_kv_cache" (vLLM ≥ 0.17)`}
}

// samplerPass sets r's sampler fields for plan under mode and returns the
// bytes the pass adds inside the budget, max(pass − arena, 0). Errors: an
// *OverflowError.
func samplerPass(mode SamplerWarmup, plan *Plan, r *FitReport) (int64, error) {
	r.SamplerWarmup = mode
	if mode == SamplerWarmupNone {
		return 0, nil
	}
	const what = "fit sampler pass"
	o, logits := plan.Options, plan.Buffers[Logits]
	r.SamplerRows = min(o.MaxBatchSize, o.MaxBatchTokens)
	r.SamplerBytesPerElement = logits.DType.Size() + SamplerSortBytesPerElement
	if mode == SamplerWarmupAfterKVCache {
		r.SamplerBytesPerElement = logits.DType.Size() + SamplerTritonBytesPerElement
	}
	elems, err := CheckedMul(what, r.SamplerRows, logits.Shape[1])
	if err != nil {
		return 0, err
	}
	if r.SamplerPassBytes, err = CheckedMul(what, elems, r.SamplerBytesPerElement); err != nil {
		return 0, err
	}
	r.SamplerBudgetBytes = max(r.SamplerPassBytes-r.ArenaBytes, 0)
	return r.SamplerBudgetBytes, nil
}

// samplerNote says what the sampler pass added inside the budget, ""
// under SamplerWarmupNone; outsideNote says what lies outside it.
func samplerNote(r *FitReport) string {
	if r.SamplerWarmup == SamplerWarmupNone {
		return ""
	}
	return fmt.Sprintf("sampler (sampler_warmup %s): vLLM's dummy sampler pass over [%d, vocab] at %d B per element is %d B (%s); "+
		"the profile's peak is the larger of it and the arena (%d B), adding %d B inside the budget",
		r.SamplerWarmup, r.SamplerRows, r.SamplerBytesPerElement, r.SamplerPassBytes, HumanBytes(r.SamplerPassBytes),
		r.ArenaBytes, r.SamplerBudgetBytes)
}
