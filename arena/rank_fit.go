package arena

import (
	"encoding/json"
	"fmt"
)

// RankFit is one rank's fit: where it sits, what it holds and its
// FitReport on its device.
type RankFit struct {
	RankIndex
	// FirstLayer, EndLayer, AttentionHeads, KVHeads, Experts and
	// VocabShard are the rank's RankPlan fields.
	FirstLayer     int64 `json:"first_layer"`
	EndLayer       int64 `json:"end_layer"`
	AttentionHeads int64 `json:"attention_heads"`
	KVHeads        int64 `json:"kv_heads"`
	Experts        int64 `json:"experts"`
	VocabShard     int64 `json:"vocab_shard"`
	// Report is the rank's fit on its device (FitReport; its Suggestions
	// are nil: RankFitReport.Suggestions speaks for the layout).
	Report *FitReport `json:"report"`
}

// RankSuggestions are the smallest single changes that make a layout that
// does not fit, fit on every rank; each keeps everything else as it was
// and a zero field means no such change.
type RankSuggestions struct {
	// FitSuggestions are max_batch_tokens, max_seq_len, logits_rows and
	// gpu_memory_utilization (the highest over the ranks of each rank's
	// lowest), as Fit's.
	FitSuggestions
	// TensorParallelSize is the smallest tensor_parallel_size above the
	// layout's, at most MaxSuggestedTensorParallelSize, that fits ("use t
	// = 4"), on devices like the layout's first.
	TensorParallelSize int64 `json:"tensor_parallel_size,omitempty"`
}

// MaxSuggestedTensorParallelSize is the largest tensor_parallel_size a
// RankSuggestions proposes: the GPUs of one NVLink host.
const MaxSuggestedTensorParallelSize = 8

// RankFitReport is the fit of every rank of a ParallelLayout, each on its
// device. A layout fits when every rank fits. vLLM sizes one KV cache for
// all ranks of a replica, the smallest any rank can hold
// (vllm/v1/core/kv_cache_utils.py get_kv_cache_configs: num_blocks the
// minimum over the workers), so KVBlocks is that minimum; data-parallel
// replicas each hold their own.
type RankFitReport struct {
	// Fits: every rank fits.
	Fits bool `json:"fits"`
	// ModelType is the config's model_type.
	ModelType string `json:"model_type"`
	// Layout is the layout fitted, every size resolved (≥ 1); GPUs its
	// ranks.
	Layout ParallelLayout `json:"layout"`
	GPUs   int64          `json:"gpus"`
	// Ranks is each rank's fit, in global rank order.
	Ranks []RankFit `json:"ranks"`
	// KVBlocks is the minimum of the ranks' FitReport.KVBlocks over those
	// with paged layers: the paged KV-cache blocks of each replica.
	// KVTokens is KVBlocks × kv_block_size × data_parallel_size, over all
	// replicas.
	KVBlocks int64 `json:"kv_blocks"`
	KVTokens int64 `json:"kv_tokens"`
	// MaxConcurrentSeqs is the minimum of the ranks' MaxConcurrentSeqs ×
	// data_parallel_size: sequences of max_seq_len served at once.
	MaxConcurrentSeqs int64 `json:"max_concurrent_seqs"`
	// MaxSeqLen is the plans' max_seq_len.
	MaxSeqLen int64 `json:"max_seq_len"`
	// ShortfallBytes is the largest rank's shortfall; 0 when it fits.
	ShortfallBytes int64 `json:"shortfall_bytes"`
	// Suggestions is set when it does not fit.
	Suggestions *RankSuggestions `json:"suggestions,omitempty"`
}

// MarshalJSON writes a nil Ranks as [].
func (r RankFitReport) MarshalJSON() ([]byte, error) {
	type plain RankFitReport
	p := plain(r)
	p.Ranks = nonNilSlice(p.Ranks)
	return json.Marshal(p)
}

// FitRanks fits every rank of layout (PlanRanks(cfg, opts, fo.Weights,
// layout)) on its device: devs holds one DeviceMemory for every rank, or
// one per rank in global rank order. Each rank's FitReport is Fit's
// arithmetic on the rank's weights, arena and KV layout; the layout's KV
// blocks are the minimum over the ranks (RankFitReport). When it does not
// fit, Suggestions gives the smallest single change, a larger
// tensor_parallel_size among them. The one-GPU layout's single report is
// Fit's (PlanFor(cfg, opts), Fit on devs[0]). Errors: an *OptionError for
// no devices or a count other than 1 or layout.GPUs() ("devices"), a
// device Fit refuses, or, on more than one GPU, a set
// checkpoint_weight_bytes or checkpoint_pooled_tensor_bytes (per-rank
// checkpoint sizes are not modelled); PlanRanks's and Fit's errors.
func FitRanks(cfg *ModelConfig, opts Options, layout ParallelLayout, devs []DeviceMemory, fo FitOptions) (*RankFitReport, error) {
	r, err := fitRanks(cfg, opts, layout, devs, fo)
	if err != nil || r.Fits {
		return r, err
	}
	r.Suggestions = suggestRanks(cfg, opts, r.Layout, devs, fo, r)
	return r, nil
}

// fitRanks is FitRanks without the suggestions.
func fitRanks(cfg *ModelConfig, opts Options, layout ParallelLayout, devs []DeviceMemory, fo FitOptions) (*RankFitReport, error) {
	l, err := layout.resolved()
	if err != nil {
		return nil, err
	}
	n := l.GPUs()
	if len(devs) != 1 && int64(len(devs)) != n {
		return nil, &OptionError{Option: "devices", Value: int64(len(devs)),
			Reason: fmt.Sprintf("give one device for every rank or one per rank (%d for %s)", n, l)}
	}
	for _, d := range devs {
		if err := d.validate(); err != nil {
			return nil, err
		}
	}
	if n > 1 && (fo.CheckpointWeightBytes != nil || fo.CheckpointPooledTensorBytes != nil) {
		return nil, &OptionError{Option: "checkpoint_weight_bytes", Value: n,
			Reason: "a checkpoint's sizes are per model, not per rank: on more than one GPU the weights are sized by estimate"}
	}
	o, ranks, err := planLayout(cfg, opts, l, fo)
	if err != nil {
		return nil, err
	}
	out := &RankFitReport{Fits: true, ModelType: cfg.ModelType, Layout: l, GPUs: n, KVBlocks: -1, MaxConcurrentSeqs: -1}
	for i, rp := range ranks {
		dev := devs[0]
		if len(devs) > 1 {
			dev = devs[i]
		}
		rep, err := fitRank(rp, cfg, dev, o, fo, n)
		if err != nil {
			return nil, err
		}
		out.Ranks = append(out.Ranks, RankFit{RankIndex: rp.RankIndex, FirstLayer: rp.FirstLayer, EndLayer: rp.EndLayer,
			AttentionHeads: rp.AttentionHeads, KVHeads: rp.KVHeads, Experts: rp.Experts, VocabShard: rp.VocabShard, Report: rep})
		out.Fits = out.Fits && rep.Fits
		out.ShortfallBytes = max(out.ShortfallBytes, rep.ShortfallBytes)
		out.MaxSeqLen = rep.MaxSeqLen
		if rep.KVBytesPerBlock > 0 && (out.KVBlocks < 0 || rep.KVBlocks < out.KVBlocks) {
			out.KVBlocks = rep.KVBlocks
		}
		if rep.SeqBytes > 0 && (out.MaxConcurrentSeqs < 0 || rep.MaxConcurrentSeqs < out.MaxConcurrentSeqs) {
			out.MaxConcurrentSeqs = rep.MaxConcurrentSeqs
		}
	}
	out.KVBlocks, out.MaxConcurrentSeqs = max(out.KVBlocks, 0), max(out.MaxConcurrentSeqs, 0)
	s := sizer{what: "kv tokens of the layout"}
	out.KVTokens = s.mul(out.KVBlocks, ranks[0].Plan.Options.KVBlockSize, l.DataParallelSize)
	out.MaxConcurrentSeqs = s.mul(out.MaxConcurrentSeqs, l.DataParallelSize)
	return out, s.err
}

// fitRank is rank rp's FitReport on dev under o (fo for the one-GPU
// layout, which is Fit's own).
func fitRank(rp RankPlan, cfg *ModelConfig, dev DeviceMemory, o fitParams, fo FitOptions, gpus int64) (*FitReport, error) {
	if gpus == 1 {
		r, err := Fit(rp.Plan, cfg, dev, fo)
		if err == nil {
			r.Suggestions = nil
		}
		return r, err
	}
	f, err := newFitter(rp.Config, dev, o, rp.Weights)
	if err != nil {
		return nil, err
	}
	r, err := f.fit(rp.Plan)
	if err != nil {
		return nil, err
	}
	r.Largest = f.largest(rp.Plan, r)
	r.Notes = f.notes(rp.Plan, r)
	return r, nil
}

// suggestRanks searches, for layout l that does not fit (report r), the
// smallest single changes that make every rank fit, as Fit's suggest does
// for one device, and the smallest larger tensor_parallel_size.
func suggestRanks(cfg *ModelConfig, opts Options, l ParallelLayout, devs []DeviceMemory, fo FitOptions, r *RankFitReport) *RankSuggestions {
	plan0, err := PlanFor(cfg, opts)
	if err != nil {
		return &RankSuggestions{}
	}
	resolved := plan0.Options
	fits := func(opts Options, l ParallelLayout, devs []DeviceMemory) bool {
		fr, err := fitRanks(cfg, opts, l, devs, fo)
		return err == nil && fr.Fits
	}
	s := &RankSuggestions{}
	s.MaxBatchTokens = largestFitting(1, resolved.MaxBatchTokens-1, func(m int64) bool {
		o := resolved
		o.MaxBatchTokens, o.MaxBatchSize = m, min(resolved.MaxBatchSize, m)
		return fits(o, l, devs)
	})
	seqHi := resolved.MaxSeqLen - 1
	if limit, _ := cfg.MaxSeqLenLimit(); limit > 0 {
		seqHi = min(seqHi, limit)
	}
	s.MaxSeqLen = largestFitting(1, seqHi, func(n int64) bool {
		o := resolved
		o.MaxSeqLen = n
		return fits(o, l, devs)
	})
	for _, rk := range r.Ranks {
		u := lowestUtilization(rk.Report.RequiredBytes, rk.Report.Device.TotalBytes)
		if rk.Report.UtilizationScope == UtilizationInstance {
			u = lowestInstanceUtilization(rk.Report.RequiredBytes, rk.Report.Device.FreeBytes, rk.Report.Device.TotalBytes)
		}
		if u == 0 {
			s.GPUMemoryUtilization = 0
			break
		}
		s.GPUMemoryUtilization = max(s.GPUMemoryUtilization, u)
	}
	if resolved.LogitsRows != LogitsSampled {
		o := resolved
		o.LogitsRows = LogitsSampled
		if fits(o, l, devs) {
			s.LogitsRows = LogitsSampled
		}
	}
	for t := l.TensorParallelSize + 1; t <= MaxSuggestedTensorParallelSize; t++ {
		lt := l
		lt.TensorParallelSize = t
		if fits(resolved, lt, devs[:1]) {
			s.TensorParallelSize = t
			break
		}
	}
	return s
}

// FitRank is the FitReport of one rank of layout on dev with the rank's
// weights sized exactly: its shard's tensor sizes (TensorShard.RankBytes
// of RankShards(cfg, fo.Weights, layout, rank)), as a pooled load
// allocates them (Manager.LoadWeightsRank), so the report's
// CheckpointWeightBytes is their sum and WeightPaddingBytes the pool's
// alignment padding; everything else is the rank's report in FitRanks.
// Its KVBlocks are this rank's alone: the layout's are the minimum over
// the ranks (RankFitReport.KVBlocks). Errors: an *OptionError for a rank
// outside [0, layout.GPUs()) or a set CheckpointWeightBytes or
// CheckpointPooledTensorBytes (the shard's sizes say them); RankShards'
// and FitRanks' errors.
func FitRank(cfg *ModelConfig, opts Options, layout ParallelLayout, rank int64, dev DeviceMemory, fo FitOptions) (*FitReport, error) {
	l, err := layout.resolved()
	if err != nil {
		return nil, err
	}
	n := l.GPUs()
	if rank < 0 || rank >= n {
		return nil, &OptionError{Option: "rank", Value: rank, Reason: fmt.Sprintf("layout %s has ranks 0 to %d", l, n-1)}
	}
	const leave = "a rank's weights are its shard's tensor sizes: leave it unset"
	if fo.CheckpointWeightBytes != nil {
		return nil, &OptionError{Option: "checkpoint_weight_bytes", Value: *fo.CheckpointWeightBytes, Reason: leave}
	}
	if fo.CheckpointPooledTensorBytes != nil {
		return nil, &OptionError{Option: "checkpoint_pooled_tensor_bytes", Value: len(fo.CheckpointPooledTensorBytes), Reason: leave}
	}
	if err := dev.validate(); err != nil {
		return nil, err
	}
	shards, err := RankShards(cfg, fo.Weights, l, rank)
	if err != nil {
		return nil, err
	}
	fo.CheckpointPooledTensorBytes = make([]int64, len(shards))
	for i, s := range shards {
		fo.CheckpointPooledTensorBytes[i] = s.RankBytes()
	}
	o, ranks, err := planLayout(cfg, opts, l, fo)
	if err != nil {
		return nil, err
	}
	return fitRank(ranks[rank], cfg, dev, o, fo, n)
}

// planLayout resolves fo and plans every rank of layout l under it.
// Errors: FitOptions' and PlanRanks'.
func planLayout(cfg *ModelConfig, opts Options, l ParallelLayout, fo FitOptions) (fitParams, []RankPlan, error) {
	o, err := fo.resolve()
	if err != nil {
		return o, nil, err
	}
	ranks, err := PlanRanks(cfg, opts, o.weights, l)
	return o, ranks, err
}
