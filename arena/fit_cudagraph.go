package arena

import "fmt"

// CUDAGraphs is cuda_graphs: whether the fit sizes the CUDA graphs vLLM's
// V1 engine captures (Worker.compile_or_warm_up_model →
// GPUModelRunner.capture_model, vllm/v1/worker/gpu_model_runner.py) on
// their own, and where in the budget they count.
//
// vLLM captures one PIECEWISE graph set (mixed prefill-decode batches, the
// model split at every attention op: num_layers + 1 pieces) for every
// capture size, and one FULL graph (uniform decode batches) for every
// capture size up to max_num_seqs × (1 + k) (capture_model; the default
// cudagraph_mode FULL_AND_PIECEWISE since vLLM 0.11). The capture sizes
// follow vllm/config/vllm.py VllmConfig._set_cudagraph_sizes: the largest
// is min(2 × max_num_seqs × (1 + k), 512), 1024 for gpt-oss
// (vllm/model_executor/models/config.py
// GptOssForCausalLMConfig.verify_and_update_config), at most
// max_num_batched_tokens; the sizes are 1, 2, 4, then every 8 below 256,
// then every 16 from 256 up to the largest (cudaGraphCaptureSizes). k is
// the plan's k_max, vLLM's num_speculative_tokens.
//
// The graphs share one memory pool: the largest capture allocates one
// forward's activations and the smaller ones reuse them; every further
// graph adds memory of its own, about the same for every size (the
// instantiated graph). The fit's estimate, CUDAGraphBytes, is
//
//	activations + piecewise captures × (num_layers + 1) × CUDAGraphPieceBytes
//	            + full captures × CUDAGraphFullBytes
//
// where activations are the arena's buffers planned for max_batch_tokens
// = the largest capture size, less its logits (vLLM computes logits
// outside the graphs). The per-graph constants are what vLLM 0.19 measured
// on an H100 for the graph after the first ("Estimated PIECEWISE CUDA
// graph memory: … + (n-1) × 6.00 MiB per-graph", 12.00 MiB for 62-layer
// Gemma-3-27B; FULL 6 to 8 MiB: GPUModelRunner.profile_cudagraph_memory,
// vLLM PR #30515). Against the "Graph capturing finished in N secs, took
// X GiB" vLLM logged, the estimate is 0.888 GiB for Llama-3.1-8B (0.91
// logged), 1.188 GiB for Gemma-3-27B (1.14) and 1.41 GiB for gpt-oss-20b
// (1.84, mostly memory outside PyTorch that vLLM's own estimate, 1.30 GiB,
// misses too); docs/fit-accuracy.md has the sources.
type CUDAGraphs string

// The cuda_graphs values; "" is CUDAGraphsNone.
const (
	// CUDAGraphsNone sizes no CUDA graphs apart: the reserve covers them
	// (DefaultReserveBytes), as for gpuarena's own engine, or there are
	// none (vLLM's --enforce-eager). The default.
	CUDAGraphsNone CUDAGraphs = "none"
	// CUDAGraphsAfterKVCache is vLLM's V1 engine before 0.21 (and later
	// with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0): the graphs are
	// captured after the KV cache has been sized to fill the budget
	// (Worker.determine_available_memory does not count them), so they
	// must fit in the memory outside the budget, free − budget, beside the
	// reserve (and, under SamplerWarmupAfterKVCache, the warm-up pass that
	// runs after them).
	CUDAGraphsAfterKVCache CUDAGraphs = "after_kv_cache"
	// CUDAGraphsEstimated is vLLM's V1 engine from 0.21 (and earlier with
	// VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1): the profile captures
	// the two largest sizes of each mode into a throwaway pool and
	// extrapolates to all of them (GPUModelRunner.profile_cudagraph_memory),
	// and Worker.determine_available_memory takes that estimate out of the
	// KV cache, so the graphs count inside the budget (the fit counts its
	// own estimate there).
	CUDAGraphsEstimated CUDAGraphs = "estimated"
)

// CUDA-graph memory per captured size beyond the first capture's
// activations, as vLLM 0.19 measured it on an H100 (see CUDAGraphs).
const (
	// CUDAGraphPieceBytes is one piece of a PIECEWISE graph set, 192 KiB:
	// 6 MiB over the 33 pieces of 32-layer Llama-3.1-8B, 12 MiB over the
	// 63 of 62-layer Gemma-3-27B.
	CUDAGraphPieceBytes = 192 << 10
	// CUDAGraphFullBytes is one FULL graph, 8 MiB: the larger of the 6 MiB
	// (Llama-3.1-8B, Gemma-3-27B) and 8 MiB (gpt-oss-20b) vLLM measured.
	CUDAGraphFullBytes = 8 << 20
)

// DefaultContextReserveBytes is what an unset FitOptions.ReserveBytes
// reserves when the fit sizes the CUDA graphs on their own (CUDAGraphs
// other than none), 576 MiB: DefaultReserveBytes without its allowance
// for CUDA graphs, which would count them twice. It holds the CUDA
// context and NCCL's start-up buffers, 0.51 GiB on an H100 as vLLM logs
// them before loading anything ("worker init memory snapshot: …
// cuda_memory=0.51GiB", vllm/v1/worker/gpu_worker.py Worker.init_device),
// rounded up to 64 MiB.
const DefaultContextReserveBytes = 576 << 20

// vLLM's largest CUDA-graph capture size (VllmConfig._set_cudagraph_sizes)
// and gpt-oss's (GptOssForCausalLMConfig.verify_and_update_config; 992 in
// vLLM 0.11, two sizes fewer).
const (
	vllmMaxCUDAGraphCaptureSize   = 512
	gptOSSMaxCUDAGraphCaptureSize = 1024
)

// ParseCUDAGraphs reads cuda_graphs: "" and "none" are CUDAGraphsNone,
// "after_kv_cache" and "estimated" the vLLM eras. Errors: an *OptionError
// for "cuda_graphs".
func ParseCUDAGraphs(s string) (CUDAGraphs, error) {
	switch CUDAGraphs(s) {
	case "", CUDAGraphsNone:
		return CUDAGraphsNone, nil
	case CUDAGraphsAfterKVCache, CUDAGraphsEstimated:
		return CUDAGraphs(s), nil
	}
	return "", &OptionError{Option: "cuda_graphs", Value: clip(s),
		Reason: `want "none", "after_kv_cache" (vLLM < 0.21) or "estimated" (vLLM ≥ 0.21)`}
}

// cudaGraphCaptureSizes is vLLM's CUDA-graph capture sizes for model_type
// modelType under o, ascending (VllmConfig._set_cudagraph_sizes): the
// largest is min(2 × max_batch_size × (1 + k_max), 512), or 1024 for
// gpt_oss, at most max_batch_tokens; then 1, 2, 4, every 8 from 8 below
// 256 and every 16 from 256, up to the largest. o is resolved (KMax set).
func cudaGraphCaptureSizes(modelType string, o Options) []int64 {
	largest := min(2*o.MaxBatchSize*(1+*o.KMax), vllmMaxCUDAGraphCaptureSize)
	if modelType == "gpt_oss" {
		largest = gptOSSMaxCUDAGraphCaptureSize
	}
	largest = min(largest, o.MaxBatchTokens)
	var sizes []int64
	for _, s := range []int64{1, 2, 4} {
		if s <= largest {
			sizes = append(sizes, s)
		}
	}
	for s := int64(8); s <= largest && s < 256; s += 8 {
		sizes = append(sizes, s)
	}
	for s := int64(256); s <= largest; s += 16 {
		sizes = append(sizes, s)
	}
	return sizes
}

// cudaGraphMemory sets r's CUDA-graph fields for plan of cfg under mode and
// returns the bytes they add inside the budget: CUDAGraphBytes under
// CUDAGraphsEstimated, 0 otherwise (after_kv_cache's graphs lie outside
// the budget, none's in the reserve). Errors: PlanFor's and
// NewPoolLayout's for the plan at the largest capture size; an
// *OverflowError.
func cudaGraphMemory(mode CUDAGraphs, cfg *ModelConfig, plan *Plan, r *FitReport) (int64, error) {
	r.CUDAGraphs = mode
	if mode == CUDAGraphsNone {
		return 0, nil
	}
	o := plan.Options
	sizes := cudaGraphCaptureSizes(plan.ModelType, o)
	r.CUDAGraphPiecewiseCaptures, r.CUDAGraphPieces = int64(len(sizes)), cfg.NumLayers+1
	r.CUDAGraphLargestCapture = sizes[len(sizes)-1]
	for _, s := range sizes {
		if s <= o.MaxBatchSize*(1+*o.KMax) {
			r.CUDAGraphFullCaptures++
		}
	}
	at := o
	at.MaxBatchTokens, at.MaxBatchSize = r.CUDAGraphLargestCapture, min(o.MaxBatchSize, r.CUDAGraphLargestCapture)
	largest, err := PlanFor(cfg, at)
	if err != nil {
		return 0, err
	}
	pool, err := NewPoolLayout(largest)
	if err != nil {
		return 0, err
	}
	r.CUDAGraphActivationBytes = pool.Bytes - largest.Buffers[Logits].Bytes
	s := &sizer{what: "fit cuda graphs"}
	r.CUDAGraphBytes = s.add(r.CUDAGraphActivationBytes,
		s.mul(r.CUDAGraphPiecewiseCaptures, r.CUDAGraphPieces, CUDAGraphPieceBytes),
		s.mul(r.CUDAGraphFullCaptures, CUDAGraphFullBytes))
	if s.err != nil {
		return 0, s.err
	}
	if mode == CUDAGraphsEstimated {
		return r.CUDAGraphBytes, nil
	}
	return 0, nil
}

// cudaGraphNote says what the CUDA graphs add and where, "" under
// CUDAGraphsNone.
func cudaGraphNote(r *FitReport) string {
	if r.CUDAGraphs == CUDAGraphsNone {
		return ""
	}
	where := "captured after the KV cache is sized, outside the budget (vLLM < 0.21)"
	if r.CUDAGraphs == CUDAGraphsEstimated {
		where = "estimated during the profile and counted inside the budget (vLLM ≥ 0.21)"
	}
	return fmt.Sprintf("CUDA graphs (cuda_graphs %s): %d B (%s), %s: activations of the largest capture (%d tokens) %d B + "+
		"%d piecewise captures × %d pieces × %d B + %d full captures × %d B",
		r.CUDAGraphs, r.CUDAGraphBytes, HumanBytes(r.CUDAGraphBytes), where, r.CUDAGraphLargestCapture, r.CUDAGraphActivationBytes,
		r.CUDAGraphPiecewiseCaptures, r.CUDAGraphPieces, CUDAGraphPieceBytes, r.CUDAGraphFullCaptures, CUDAGraphFullBytes)
}
