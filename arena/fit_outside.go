package arena

import (
	"fmt"
	"strings"
)

// reserveInside is the reserve the budget holds: all of it under
// SamplerWarmupNone, none under a vLLM SamplerWarmup, where it lies
// outside (vLLM's CUDA context is not in its budget).
func reserveInside(r *FitReport) int64 {
	if r.SamplerWarmup == SamplerWarmupNone {
		return r.ReserveBytes
	}
	return 0
}

// outsidePart is one thing vLLM allocates outside its budget, after its
// KV cache has filled it.
type outsidePart struct {
	what  string
	bytes int64
}

// outsideParts is what of r must fit outside the budget, in the order
// vLLM allocates it: the reserve under a vLLM SamplerWarmup, the CUDA
// graphs under CUDAGraphsAfterKVCache and the sampler warm-up pass under
// SamplerWarmupAfterKVCache; none when nothing lies outside.
func outsideParts(r *FitReport) []outsidePart {
	var parts []outsidePart
	if r.SamplerWarmup != SamplerWarmupNone {
		parts = append(parts, outsidePart{"the reserve", r.ReserveBytes})
	}
	if r.CUDAGraphs == CUDAGraphsAfterKVCache {
		parts = append(parts, outsidePart{"the CUDA graphs", r.CUDAGraphBytes})
	}
	if r.SamplerWarmup == SamplerWarmupAfterKVCache {
		parts = append(parts, outsidePart{"the sampler warm-up pass", r.SamplerPassBytes})
	}
	return parts
}

// outsideFits sets OutsideBudgetBytes, Device.FreeBytes −
// ProcessBudgetBytes, and OutsideRequiredBytes, the sum of outsideParts,
// and reports whether the one holds the other; true, with both 0, when
// nothing lies outside the budget. Errors: an *OverflowError.
func outsideFits(r *FitReport) (bool, error) {
	parts := outsideParts(r)
	if len(parts) == 0 {
		return true, nil
	}
	sizes := make([]int64, len(parts))
	for i, p := range parts {
		sizes[i] = p.bytes
	}
	need, err := CheckedSum("fit memory outside the budget", sizes...)
	if err != nil {
		return false, err
	}
	r.OutsideBudgetBytes, r.OutsideRequiredBytes = r.Device.FreeBytes-r.ProcessBudgetBytes, need
	return need <= r.OutsideBudgetBytes, nil
}

// outsideNote says what the memory outside the budget must hold and
// whether it does, "" when nothing lies there.
func outsideNote(r *FitReport) string {
	parts := outsideParts(r)
	if len(parts) == 0 {
		return ""
	}
	what := make([]string, len(parts))
	for i, p := range parts {
		what[i] = fmt.Sprintf("%s %d B", p.what, p.bytes)
	}
	verdict := "holds them"
	if short := r.OutsideRequiredBytes - r.OutsideBudgetBytes; short > 0 {
		verdict = fmt.Sprintf("is short by %d B (%s): vLLM runs out of memory after sizing its KV cache "+
			"(lower gpu_memory_utilization or max_batch_size, or capture fewer CUDA graphs)", short, HumanBytes(short))
	}
	return fmt.Sprintf("outside the budget: free − budget = %d B must hold what vLLM allocates after its KV cache fills the budget, "+
		"%s, %d B in all, and %s", r.OutsideBudgetBytes, joinAnd(what), r.OutsideRequiredBytes, verdict)
}

// joinAnd joins items as "a", "a and b" or "a, b and c"; "" for none.
func joinAnd(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}
