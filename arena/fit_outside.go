package arena

import "fmt"

// reserveInside is the reserve the budget holds: all of it under
// SamplerWarmupNone, none under a vLLM SamplerWarmup, where it lies
// outside (vLLM's CUDA context is not in its budget).
func reserveInside(r *FitReport) int64 {
	if r.SamplerWarmup == SamplerWarmupNone {
		return r.ReserveBytes
	}
	return 0
}

// outsideChecked reports whether anything of r must fit outside the
// budget: the reserve under a vLLM SamplerWarmup, the CUDA graphs under
// CUDAGraphsAfterKVCache.
func outsideChecked(r *FitReport) bool {
	return r.SamplerWarmup != SamplerWarmupNone || r.CUDAGraphs == CUDAGraphsAfterKVCache
}

// outsideFits sets OutsideBudgetBytes, Device.FreeBytes −
// ProcessBudgetBytes, and OutsideRequiredBytes, the reserve (under a vLLM
// SamplerWarmup), the CUDA graphs (under CUDAGraphsAfterKVCache) and the
// sampler warm-up pass (under SamplerWarmupAfterKVCache), and reports
// whether the one holds the other; true, with both 0, when nothing lies
// outside the budget. Errors: an *OverflowError.
func outsideFits(r *FitReport) (bool, error) {
	if !outsideChecked(r) {
		return true, nil
	}
	var reserve, graphs, pass int64
	if r.SamplerWarmup != SamplerWarmupNone {
		reserve = r.ReserveBytes
	}
	if r.CUDAGraphs == CUDAGraphsAfterKVCache {
		graphs = r.CUDAGraphBytes
	}
	if r.SamplerWarmup == SamplerWarmupAfterKVCache {
		pass = r.SamplerPassBytes
	}
	need, err := CheckedSum("fit memory outside the budget", reserve, graphs, pass)
	if err != nil {
		return false, err
	}
	r.OutsideBudgetBytes, r.OutsideRequiredBytes = r.Device.FreeBytes-r.ProcessBudgetBytes, need
	return need <= r.OutsideBudgetBytes, nil
}

// outsideNote says what the memory outside the budget must hold and
// whether it does, "" when nothing lies there.
func outsideNote(r *FitReport) string {
	if !outsideChecked(r) {
		return ""
	}
	var what []string
	if r.SamplerWarmup != SamplerWarmupNone {
		what = append(what, fmt.Sprintf("the reserve %d B", r.ReserveBytes))
	}
	if r.CUDAGraphs == CUDAGraphsAfterKVCache {
		what = append(what, fmt.Sprintf("the CUDA graphs %d B", r.CUDAGraphBytes))
	}
	if r.SamplerWarmup == SamplerWarmupAfterKVCache {
		what = append(what, fmt.Sprintf("the sampler warm-up pass %d B", r.SamplerPassBytes))
	}
	verdict := "holds them"
	if short := r.OutsideRequiredBytes - r.OutsideBudgetBytes; short > 0 {
		verdict = fmt.Sprintf("is short by %d B (%s): vLLM runs out of memory after sizing its KV cache "+
			"(lower gpu_memory_utilization or max_batch_size, or capture fewer CUDA graphs)", short, HumanBytes(short))
	}
	return fmt.Sprintf("outside the budget: free − budget = %d B must hold what vLLM allocates after its KV cache fills the budget, "+
		"%s, %d B in all, and %s", r.OutsideBudgetBytes, joinAnd(what), r.OutsideRequiredBytes, verdict)
}

// joinAnd joins items as "a", "a and b" or "a, b and c".
func joinAnd(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	out := items[0]
	for _, it := range items[1 : len(items)-1] {
		out += ", " + it
	}
	return out + " and " + items[len(items)-1]
}
