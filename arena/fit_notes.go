package arena

import (
	"fmt"
	"strings"
)

// logitsShareNote: the fit notes logits_rows "sampled" when the logits
// buffer is at least 1/logitsShareNote of the arena's buffers.
const logitsShareNote = 4

// notes explains what the fit counted, assumed and left out.
func (f *fitter) notes(plan *Plan, r *FitReport) []string {
	var notes []string
	add := func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }
	for _, n := range plan.Notes {
		add("plan: %s", n)
	}
	add("%s", f.budgetNote(r))
	if f.opts.excludeWeights {
		add("the weights (%d B) are excluded: they are elsewhere or already counted as used", f.weights.Bytes)
	} else if f.opts.exactWeights >= 0 {
		add("weights: %d B (%s) from the checkpoint's headers; the estimate from config.json is %d B (%+d B)",
			r.CheckpointWeightBytes, HumanBytes(r.CheckpointWeightBytes), f.weights.Bytes, f.weights.Bytes-r.CheckpointWeightBytes)
		if r.WeightPaddingBytes > 0 {
			add("weights: %d B of %d-byte alignment padding in the pooled allocation (%d B in all)",
				r.WeightPaddingBytes, PoolAlign, r.CheckpointWeightBytes+r.WeightPaddingBytes)
		}
	} else {
		add("weights: %d B (%s) for %d params",
			r.WeightBytes, HumanBytes(r.WeightBytes), f.weights.TotalParams)
	}
	for _, n := range f.weights.Notes {
		add("weights: %s", n)
	}
	if r.CUDAGraphs == CUDAGraphsNone {
		add("reserve: %d B (%s) for the CUDA context, library workspaces and CUDA graphs", r.ReserveBytes, HumanBytes(r.ReserveBytes))
	} else {
		add("reserve: %d B (%s) for the CUDA context and library workspaces; the CUDA graphs are sized on their own", r.ReserveBytes, HumanBytes(r.ReserveBytes))
	}
	if pad := r.ArenaBytes - plan.BufferBytes; pad > 0 {
		add("arena: %d B of buffers plus %d B of %d-byte alignment in one pool", plan.BufferBytes, pad, PoolAlign)
	}
	if n := logitsNote(plan); n != "" {
		add("%s", n)
	}
	for _, n := range []string{samplerNote(r), cudaGraphNote(r), outsideNote(r)} {
		if n != "" {
			add("%s", n)
		}
	}
	l := r.KV
	if l.BytesPerBlock == 0 {
		add("the model has no paged KV-cache layers: no KV blocks")
	}
	if l.BytesPerBlock > 0 || l.SlidingBytesPerBlock > 0 {
		add("kv cache in %s, %d B per element (kv_cache_dtype %s)", l.KVCacheDType, l.KVElementBytes, plan.Options.KVCacheDType)
	}
	if l.SlidingLayers > 0 {
		_, sb := l.SeqBlocks(r.MaxSeqLen)
		add("%d sliding-window layers (window %d) hold ⌈min(window − 1 + max_batch_tokens %d, max_seq_len)/%d⌉ + 1 = %d blocks of %d B per sequence, "+
			"as vLLM reserves them under chunked prefill",
			l.SlidingLayers, l.SlidingWindow, l.MaxBatchTokens, l.BlockTokens, sb, l.SlidingBytesPerBlock)
	}
	if l.StateBytesPerSeq > 0 {
		add("fixed state per sequence: %d B (conv %d, ssm %d in %s, compressor %d)",
			l.StateBytesPerSeq, l.ConvStateBytesPerSeq, l.SSMStateBytesPerSeq, l.SSMStateDType, l.CompressorStateBytesPerSeq)
	}
	for _, n := range l.Notes {
		add("kv: %s", n)
	}
	if r.SeqBytes > 0 {
		add("one sequence of max_seq_len %d takes %d B (%s); the KV budget of %d B holds %d of them",
			r.MaxSeqLen, r.SeqBytes, HumanBytes(r.SeqBytes), r.KVBudgetBytes, r.MaxConcurrentSeqs)
	}
	if r.MaxConcurrentSeqs > plan.Options.MaxBatchSize {
		add("memory holds %d sequences of max_seq_len but max_batch_size %d caps one decode step", r.MaxConcurrentSeqs, plan.Options.MaxBatchSize)
	}
	if r.Fits {
		return notes
	}
	add("does not fit: short by %d B (%s)", r.ShortfallBytes, HumanBytes(r.ShortfallBytes))
	s := r.Suggestions
	if s == nil { // a rank of FitRanks: the layout's report suggests
		return notes
	}
	if s.MaxBatchTokens > 0 {
		add("fits with max_batch_tokens %d (now %d)", s.MaxBatchTokens, plan.Options.MaxBatchTokens)
	}
	if s.MaxSeqLen > 0 {
		add("fits with max_seq_len %d (now %d)", s.MaxSeqLen, plan.Options.MaxSeqLen)
	}
	if s.GPUMemoryUtilization > 0 {
		add("fits with gpu_memory_utilization %g (now %g)", s.GPUMemoryUtilization, r.GPUMemoryUtilization)
	}
	if s.LogitsRows != "" {
		add("fits with logits_rows %s (now %s)", s.LogitsRows, plan.Options.LogitsRows)
	}
	if *s == (FitSuggestions{}) {
		add("no smaller max_batch_tokens or max_seq_len, no utilization ≤ 1 and no logits_rows change makes it fit: " +
			"free memory used by others, lower weight_dtype or kv_cache_dtype, or split the model over several GPUs (FitRanks; arenactl place)")
	}
	return notes
}

// budgetNote says which rule the budget follows for memory other
// processes hold, and what it left this process.
func (f *fitter) budgetNote(r *FitReport) string {
	switch {
	case f.noBudget != nil:
		return strings.TrimPrefix(f.noBudget.Error(), "arena: ")
	case r.UtilizationScope == UtilizationInstance:
		return fmt.Sprintf("budget: gpu_memory_utilization %g is this process's own, ⌈%g × %d B⌉ = %d B, as vLLM counts it (utilization_scope instance); "+
			"the %d B others hold do not count against it, but had to leave it free", r.GPUMemoryUtilization, r.GPUMemoryUtilization,
			r.Device.TotalBytes, r.BudgetBytes, r.UsedByOthersBytes)
	case r.UsedByOthersBytes > 0:
		return fmt.Sprintf("%d B (%s) of the device are already in use by others and count against the budget of %d B, leaving %d B to this process "+
			"(utilization_scope device; vLLM counts its utilization per instance instead: utilization_scope instance)",
			r.UsedByOthersBytes, HumanBytes(r.UsedByOthersBytes), r.BudgetBytes, r.ProcessBudgetBytes)
	}
	return fmt.Sprintf("budget: gpu_memory_utilization %g caps what every process on the device holds together (utilization_scope device), "+
		"%d B; memory others held would come out of it (vLLM counts its utilization per instance instead: utilization_scope instance)",
		r.GPUMemoryUtilization, r.BudgetBytes)
}

// logitsNote says, when plan holds a row of logits per token and they are
// at least 1/logitsShareNote of its buffers, what logits_rows "sampled"
// would hold and save; "" otherwise.
func logitsNote(plan *Plan) string {
	b, o := plan.Buffers[Logits], plan.Options
	if o.LogitsRows == LogitsSampled || b.Bytes == 0 || b.Bytes*logitsShareNote < plan.BufferBytes {
		return ""
	}
	s := &sizer{what: "logits"}
	o.LogitsRows = LogitsSampled
	rows := o.logitsRows(s)
	sampled := s.mul(rows, b.Shape[1], b.DType.Size())
	if s.err != nil || sampled >= b.Bytes {
		return ""
	}
	return fmt.Sprintf("logits: [%d, %d] %s is %d B (%s), %d%% of the arena's buffers; logits_rows sampled holds [%d, %d] = %d B "+
		"(max_batch_size %d × (1 + k_max %d) sampled positions, as vLLM computes them), saving %d B (%s)",
		b.Shape[0], b.Shape[1], b.DType, b.Bytes, HumanBytes(b.Bytes), b.Bytes*100/plan.BufferBytes, rows, b.Shape[1], sampled,
		o.MaxBatchSize, *o.KMax, b.Bytes-sampled, HumanBytes(b.Bytes-sampled))
}
