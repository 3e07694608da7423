package arena

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
)

// DefaultGPUMemoryUtilization is the default fraction of the device's total
// memory this process may hold (design.md §6): what an unset
// FitOptions.GPUMemoryUtilization, gpuarena.WithGPUMemoryUtilization,
// gpuworker.WithGPUMemoryUtilization and arenactl's --gpu-memory-utilization
// mean.
const DefaultGPUMemoryUtilization = 0.90

// DefaultReserveBytes is what an unset FitOptions.ReserveBytes (and
// arenactl fit without --reserve) reserves, 1 GiB: memory this process needs
// besides weights, arena, slabs and KV cache. On an
// H100/H200 the CUDA context with lazy module loading takes about 500 MiB;
// cuBLAS/cuBLASLt keep a workspace per handle and stream (32 MiB on Hopper);
// CUDA graphs captured for decode batch sizes keep their own pool (a few
// hundred MiB); separate cudaMalloc calls round up to the driver's
// granularity. 1 GiB covers these with a margin; measure and set
// ReserveBytes for a tighter fit.
const DefaultReserveBytes = 1 << 30

// fitUtilizationStep is the resolution of the suggested
// gpu_memory_utilization: 1/10000.
const fitUtilizationStep = 10000

// DeviceMemory is a device's memory as the driver reports it (cuMemGetInfo),
// in bytes.
type DeviceMemory struct {
	// TotalBytes is the device's total memory.
	TotalBytes int64 `json:"total_bytes"`
	// FreeBytes is what is free now; TotalBytes − FreeBytes is used by others.
	FreeBytes int64 `json:"free_bytes"`
}

// validate checks the device's sizes. Errors: an *OptionError for
// total_bytes ≤ 0 or free_bytes outside [0, total_bytes].
func (dev DeviceMemory) validate() error {
	switch {
	case dev.TotalBytes <= 0:
		return &OptionError{Option: "total_bytes", Value: dev.TotalBytes, Reason: "must be positive"}
	case dev.FreeBytes < 0 || dev.FreeBytes > dev.TotalBytes:
		return &OptionError{Option: "free_bytes", Value: dev.FreeBytes,
			Reason: fmt.Sprintf("must be in [0, total_bytes = %d]", dev.TotalBytes)}
	}
	return nil
}

// FitOptions are Fit's knobs; the zero value takes every default. A nil
// pointer field is unset and takes its default; a set one is taken as
// given, 0 included (set one with Go's new: new(0.95), new(int64(0))).
type FitOptions struct {
	// GPUMemoryUtilization is the fraction of the device's total memory this
	// process may hold, in (0, 1]; nil means DefaultGPUMemoryUtilization.
	// A set 0 is an error (see ValidateGPUMemoryUtilization).
	GPUMemoryUtilization *float64
	// ReserveBytes is held back for the CUDA context, library workspaces and
	// CUDA graphs, in bytes, ≥ 0; nil means DefaultReserveBytes, or
	// DefaultContextReserveBytes when CUDAGraphs sizes the graphs on their
	// own; a set 0 reserves nothing (for a device measured with this
	// process's context and graphs already in place).
	ReserveBytes *int64
	// UtilizationScope is what GPUMemoryUtilization caps: "" or
	// UtilizationDevice, every process on the device together (memory
	// others hold comes out of this process's budget); UtilizationInstance,
	// this process alone, vLLM V1's rule (others' memory must leave that
	// budget free, or the fit fails as vLLM refuses to start).
	UtilizationScope UtilizationScope
	// SamplerWarmup is which of vLLM's sampler passes the fit counts:
	// "" or SamplerWarmupNone (the default: gpuarena's engine samples in
	// its arena), SamplerWarmupProfiled (vLLM ≤ 0.16) or
	// SamplerWarmupAfterKVCache (vLLM ≥ 0.17); see SamplerWarmup.
	SamplerWarmup SamplerWarmup
	// CUDAGraphs is which of vLLM's CUDA-graph rules the fit follows: ""
	// or CUDAGraphsNone (the default: the reserve covers the graphs),
	// CUDAGraphsAfterKVCache (vLLM < 0.21: captured after the KV cache is
	// sized, outside the budget) or CUDAGraphsEstimated (vLLM ≥ 0.21:
	// counted inside the budget); see CUDAGraphs.
	CUDAGraphs CUDAGraphs
	// Weights chooses how the weights are sized (dtype override, MTP).
	Weights WeightOptions
	// ExcludeWeights leaves the weights out of the budget: they live on
	// another device, or are already resident and so counted in
	// DeviceMemory.FreeBytes. The report still carries their estimate.
	ExcludeWeights bool
	// CheckpointWeightBytes is the weights' exact size in bytes, the sum of
	// the tensors of the model's safetensors checkpoint as its headers state
	// it (checkpoint.Checkpoint.TotalBytes); nil sizes them by
	// EstimateWeights. A set value is what the fit counts (the report keeps
	// the estimate beside it); a negative one is an *OptionError for
	// "checkpoint_weight_bytes".
	CheckpointWeightBytes *int64
	// CheckpointPooledTensorBytes is the checkpoint's tensor sizes in
	// bytes (gpuworker.TensorBytes of its headers), for weights loaded in
	// one pooled allocation (the loader's default layout). Set (non-nil),
	// the report's CheckpointWeightBytes is their sum, WeightPaddingBytes is
	// PooledBytes(sizes) − that sum (each tensor at a PoolAlign-aligned
	// offset, the pool's end rounded up), and the fit counts the two
	// together: exactly what the pooled load allocates. With
	// CheckpointWeightBytes also set, the two must agree. Errors: an
	// *OptionError for "checkpoint_pooled_tensor_bytes" (a negative size, a
	// sum other than CheckpointWeightBytes); an *OverflowError.
	CheckpointPooledTensorBytes []int64
}

// FitItem is one consumer of the budget, for FitReport.Largest.
type FitItem struct {
	// Name is the item: "used_by_others", "weights.<group>" (a
	// WeightGroup), "weights" (FitOptions.CheckpointWeightBytes, which has no
	// groups), a buffer's name ("logits"), a slab's name, "reserve", or
	// "kv.one_sequence" (one max_seq_len sequence's KV cache and state).
	Name string `json:"name"`
	// Kind is "others", "weights", "buffer", "slab", "reserve",
	// "cuda_graphs" (under CUDAGraphsEstimated) or "kv".
	Kind string `json:"kind"`
	// Bytes is its size.
	Bytes int64 `json:"bytes"`
}

// FitSuggestions are the smallest single changes that make a plan that does
// not fit, fit; each keeps every other option as it was. A zero field means
// no such change exists.
type FitSuggestions struct {
	// MaxBatchTokens is the largest max_batch_tokens below the plan's that
	// fits (max_batch_size capped to it).
	MaxBatchTokens int64 `json:"max_batch_tokens,omitempty"`
	// MaxSeqLen is the largest max_seq_len below the plan's that fits.
	MaxSeqLen int64 `json:"max_seq_len,omitempty"`
	// GPUMemoryUtilization is the utilization (≤ 1, in steps of 0.0001)
	// nearest the plan's that fits: the lowest that fits when the budget
	// is short, the highest when only the memory outside the budget is
	// (FitReport.OutsideRequiredBytes).
	GPUMemoryUtilization float64 `json:"gpu_memory_utilization,omitempty"`
	// LogitsRows is "sampled" when the plan's logits_rows is "all" and
	// sampled rows alone make it fit; "" otherwise.
	LogitsRows LogitsRows `json:"logits_rows,omitempty"`
}

// FitReport is the preflight fit of a model and its Plan on one device
// (design.md §6). All sizes are in bytes. Under UtilizationDevice (the
// default) the budget is ⌊gpu_memory_utilization × total⌋; memory used by
// others (total − free), the weights, the arena, the slabs and the reserve
// count against it; what they leave is the KV budget. What others leave of
// it, ProcessBudgetBytes, is Budget's result and the GPU worker's budget
// on the same device state. Under UtilizationInstance (vLLM's rule) the
// budget is ⌈gpu_memory_utilization × total⌉ for this process alone,
// provided that much is free; others' memory does not count against it.
type FitReport struct {
	// Fits: RequiredBytes ≤ BudgetBytes, i.e. at least one sequence of
	// max_seq_len fits next to everything else; under UtilizationInstance
	// also a budget the free memory passes; when something lies outside
	// the budget (a vLLM SamplerWarmup, CUDAGraphsAfterKVCache) also
	// OutsideRequiredBytes ≤ OutsideBudgetBytes.
	Fits bool `json:"fits"`
	// ModelType is the plan's model_type.
	ModelType string `json:"model_type"`
	// GPUMemoryUtilization is the fraction the budget was computed with.
	GPUMemoryUtilization float64 `json:"gpu_memory_utilization"`
	// UtilizationScope is what GPUMemoryUtilization caps ("device" or
	// "instance"), so how memory held by other processes counts.
	UtilizationScope UtilizationScope `json:"utilization_scope"`
	// Device is the device state the fit was computed for.
	Device DeviceMemory `json:"device"`
	// BudgetBytes is ⌊GPUMemoryUtilization × Device.TotalBytes⌋ (the
	// utilization taken as its shortest decimal form, so 0.7 is exactly
	// 7/10): what every process on the device may hold together; under
	// UtilizationInstance ⌈GPUMemoryUtilization × Device.TotalBytes⌉, what
	// this process may hold.
	BudgetBytes int64 `json:"budget_bytes"`
	// ProcessBudgetBytes is the most this process may hold. Under
	// UtilizationDevice it is BudgetBytes − UsedByOthersBytes:
	// Budget(GPUMemoryUtilization, Device.TotalBytes, UsedByOthersBytes),
	// which is what gpuworker.Worker.Budget reports for a worker started
	// on this device state, 0 when others already hold all of BudgetBytes
	// (Budget's *BudgetError). Under UtilizationInstance it is BudgetBytes
	// when Device.FreeBytes ≥ BudgetBytes, else 0 (InstanceBudget's
	// *FreeMemoryError). At 0 the fit does not fit and Notes says why.
	ProcessBudgetBytes int64 `json:"process_budget_bytes"`
	// UsedByOthersBytes is Device.TotalBytes − Device.FreeBytes.
	UsedByOthersBytes int64 `json:"used_by_others_bytes"`
	// WeightBytes is what the fit counts for the weights, in bytes:
	// CheckpointWeightBytes + WeightPaddingBytes when the checkpoint's
	// sizes were given, else Weights.Bytes; 0 with FitOptions.ExcludeWeights.
	WeightBytes int64 `json:"weight_bytes"`
	// WeightSource is where WeightBytes comes from: "estimate"
	// (EstimateWeights from config.json) or "checkpoint" (the safetensors
	// headers, FitOptions.CheckpointWeightBytes).
	WeightSource string `json:"weight_source"`
	// EstimatedWeightBytes is Weights.Bytes, the estimate from config.json,
	// whichever source the fit counts.
	EstimatedWeightBytes int64 `json:"estimated_weight_bytes"`
	// CheckpointWeightBytes is the checkpoint's tensor bytes
	// (FitOptions.CheckpointWeightBytes, or the sum of
	// FitOptions.CheckpointPooledTensorBytes), 0 when neither is set.
	CheckpointWeightBytes int64 `json:"checkpoint_weight_bytes"`
	// WeightPaddingBytes is the pooled weights allocation's alignment
	// padding in bytes, PooledBytes(FitOptions.CheckpointPooledTensorBytes)
	// − CheckpointWeightBytes; 0 without pooled tensor sizes. After a pooled
	// load of that checkpoint, the ledger's bytes held by the "weights"
	// owner are CheckpointWeightBytes + WeightPaddingBytes.
	WeightPaddingBytes int64 `json:"weight_padding_bytes"`
	// Weights is the weight estimate, tensor by tensor.
	Weights *WeightReport `json:"weights"`
	// ArenaBytes is the pooled arena: the plan's buffers laid out by
	// NewPoolLayout (Plan.BufferBytes plus at most PoolAlign − 1 B of
	// alignment per buffer). SlabBytes is Plan.SlabBytes.
	ArenaBytes int64 `json:"arena_bytes"`
	SlabBytes  int64 `json:"slab_bytes"`
	// ReserveBytes is the reserve for the CUDA context, workspaces and
	// graphs (the context and workspaces alone when CUDAGraphs sizes the
	// graphs and the reserve was left unset).
	ReserveBytes int64 `json:"reserve_bytes"`
	// SamplerWarmup is the sampler_warmup the fit used. Under a vLLM mode
	// SamplerRows is min(max_batch_size, max_batch_tokens),
	// SamplerBytesPerElement the logits dtype's size plus
	// SamplerSortBytesPerElement or SamplerTritonBytesPerElement, and
	// SamplerPassBytes SamplerRows × vocab × SamplerBytesPerElement, one
	// dummy sampler pass; SamplerBudgetBytes, max(SamplerPassBytes −
	// ArenaBytes, 0), counts inside the budget; the reserve then lies
	// outside the budget (OutsideRequiredBytes), as vLLM's CUDA context
	// does. All 0 under SamplerWarmupNone.
	SamplerWarmup          SamplerWarmup `json:"sampler_warmup"`
	SamplerRows            int64         `json:"sampler_rows"`
	SamplerBytesPerElement int64         `json:"sampler_bytes_per_element"`
	SamplerPassBytes       int64         `json:"sampler_pass_bytes"`
	SamplerBudgetBytes     int64         `json:"sampler_budget_bytes"`
	// CUDAGraphs is the cuda_graphs the fit used. Under a vLLM mode
	// CUDAGraphPiecewiseCaptures is the number of vLLM's capture sizes
	// (one PIECEWISE graph set of CUDAGraphPieces = num_layers + 1 pieces
	// each), CUDAGraphFullCaptures those up to max_batch_size × (1 +
	// k_max) (one FULL graph each), CUDAGraphLargestCapture the largest
	// size in tokens, CUDAGraphActivationBytes the arena's buffers planned
	// for that many tokens less their logits, and CUDAGraphBytes the
	// estimate: CUDAGraphActivationBytes + CUDAGraphPiecewiseCaptures ×
	// CUDAGraphPieces × CUDAGraphPieceBytes + CUDAGraphFullCaptures ×
	// CUDAGraphFullBytes (see CUDAGraphs). It counts inside the budget
	// under CUDAGraphsEstimated and outside it under
	// CUDAGraphsAfterKVCache. All 0 under CUDAGraphsNone.
	CUDAGraphs                 CUDAGraphs `json:"cuda_graphs"`
	CUDAGraphPiecewiseCaptures int64      `json:"cuda_graph_piecewise_captures"`
	CUDAGraphPieces            int64      `json:"cuda_graph_pieces"`
	CUDAGraphFullCaptures      int64      `json:"cuda_graph_full_captures"`
	CUDAGraphLargestCapture    int64      `json:"cuda_graph_largest_capture"`
	CUDAGraphActivationBytes   int64      `json:"cuda_graph_activation_bytes"`
	CUDAGraphBytes             int64      `json:"cuda_graph_bytes"`
	// OutsideBudgetBytes is Device.FreeBytes − ProcessBudgetBytes, the
	// memory outside the budget, and OutsideRequiredBytes what must fit
	// there, all of which vLLM allocates after its KV cache has filled
	// the budget: the reserve under a vLLM SamplerWarmup, CUDAGraphBytes
	// under CUDAGraphsAfterKVCache and SamplerPassBytes under
	// SamplerWarmupAfterKVCache. Both 0 when nothing lies outside.
	OutsideBudgetBytes   int64 `json:"outside_budget_bytes"`
	OutsideRequiredBytes int64 `json:"outside_required_bytes"`
	// KVBudgetBytes is ProcessBudgetBytes − WeightBytes − ArenaBytes −
	// SamplerBudgetBytes − SlabBytes − ReserveBytes (without ReserveBytes
	// under a vLLM SamplerWarmup) − CUDAGraphBytes (under
	// CUDAGraphsEstimated only), 0 when that is negative.
	KVBudgetBytes int64 `json:"kv_budget_bytes"`
	// KV is the model's KV layout under the plan's options
	// (NewKVLayoutFor: kv_block_size, kv_cache_dtype,
	// mamba_ssm_cache_dtype, and max_batch_tokens for sliding windows).
	KV KVLayout `json:"kv"`
	// KVBytesPerBlock is KV.BytesPerBlock (paged layers, per block).
	KVBytesPerBlock int64 `json:"kv_bytes_per_block"`
	// MaxSeqLen is the plan's max_seq_len.
	MaxSeqLen int64 `json:"max_seq_len"`
	// MinKVBlocks is the paged blocks of one max_seq_len sequence,
	// ⌈max_seq_len / kv_block_size⌉; 0 without paged layers.
	MinKVBlocks int64 `json:"min_kv_blocks"`
	// SeqBytes is one max_seq_len sequence: KV.SeqBytes(max_seq_len).
	SeqBytes int64 `json:"seq_bytes"`
	// FixedBytesPerSeq is the part of SeqBytes that is not paged blocks:
	// sliding-window blocks and recurrent/compressor state.
	FixedBytesPerSeq int64 `json:"fixed_bytes_per_seq"`
	// MaxConcurrentSeqs is ⌊KVBudgetBytes / SeqBytes⌋: how many sequences of
	// max_seq_len the KV budget holds at once (0 when SeqBytes is 0).
	MaxConcurrentSeqs int64 `json:"max_concurrent_seqs"`
	// StateSeqs is min(MaxConcurrentSeqs, max_batch_size): the sequences
	// whose fixed part is set aside; StateCacheBytes is StateSeqs ×
	// FixedBytesPerSeq.
	StateSeqs       int64 `json:"state_seqs"`
	StateCacheBytes int64 `json:"state_cache_bytes"`
	// KVBlocks is ⌊(KVBudgetBytes − StateCacheBytes) / KVBytesPerBlock⌋, the
	// paged pool (0 without paged layers); KVCacheBytes is KVBlocks ×
	// KVBytesPerBlock and KVTokens KVBlocks × kv_block_size.
	KVBlocks     int64 `json:"kv_blocks"`
	KVCacheBytes int64 `json:"kv_cache_bytes"`
	KVTokens     int64 `json:"kv_tokens"`
	// RequiredBytes is UsedByOthersBytes + WeightBytes + ArenaBytes +
	// SamplerBudgetBytes + SlabBytes + ReserveBytes + SeqBytes, plus
	// CUDAGraphBytes under CUDAGraphsEstimated; under UtilizationInstance
	// the same without UsedByOthersBytes; under a vLLM SamplerWarmup the
	// same without ReserveBytes, which is outside the budget
	// (OutsideRequiredBytes).
	RequiredBytes int64 `json:"required_bytes"`
	// HeadroomBytes is BudgetBytes − RequiredBytes when it fits (the KV
	// cache takes it), else 0.
	HeadroomBytes int64 `json:"headroom_bytes"`
	// ShortfallBytes is RequiredBytes − BudgetBytes when it does not fit,
	// else 0; under UtilizationInstance with less free than BudgetBytes, at
	// least BudgetBytes − Device.FreeBytes (what others must free); with
	// something outside the budget, at least OutsideRequiredBytes −
	// OutsideBudgetBytes.
	ShortfallBytes int64 `json:"shortfall_bytes"`
	// Largest is the three largest items of RequiredBytes, largest first.
	Largest []FitItem `json:"largest"`
	// Suggestions is set when it does not fit.
	Suggestions *FitSuggestions `json:"suggestions,omitempty"`
	// Notes says what the fit counted, assumed and left out. It starts with
	// the plan's notes (Plan.Notes: how the config was read, such as an
	// unknown model_type planned as dense), each prefixed "plan: ".
	Notes []string `json:"notes"`
}

// MarshalJSON writes nil slices as [] so the JSON shape is stable.
func (r FitReport) MarshalJSON() ([]byte, error) {
	type plain FitReport
	p := plain(r)
	p.Largest, p.Notes = nonNilSlice(p.Largest), nonNilSlice(p.Notes)
	return json.Marshal(p)
}

// Fit checks whether the model cfg, its weights and plan fit on dev. The
// weights are sized by EstimateWeights for one device (FitRanks fits
// each rank of several); the KV cache by NewKVLayoutFor under the plan's
// options. When it does not fit, Suggestions gives the largest
// max_batch_tokens, the largest max_seq_len (never past the model's
// MaxSeqLenLimit) and the lowest gpu_memory_utilization that would fit,
// each alone, and logits_rows "sampled" when that alone fits. Other
// processes that hold all of the budget (Budget's *BudgetError; under
// UtilizationInstance, InstanceBudget's *FreeMemoryError) make a report
// that does not fit, not an error. Errors: an *OptionError (errors.Is
// ErrInvalidOption) for a set gpu_memory_utilization outside (0, 1], an
// unknown utilization_scope, sampler_warmup or cuda_graphs, a negative
// reserve_bytes, an unsupported
// weight_dtype, total_bytes ≤ 0, free_bytes outside [0, total_bytes], a
// negative checkpoint_weight_bytes, or checkpoint_pooled_tensor_bytes with
// a negative size or a sum other than a set checkpoint_weight_bytes; a
// *ConfigError for a nil or mismatched cfg; NewKVLayoutFor's errors for
// the plan's options; an *OverflowError; an error for a nil plan.
func Fit(plan *Plan, cfg *ModelConfig, dev DeviceMemory, opts FitOptions) (*FitReport, error) {
	switch {
	case plan == nil:
		return nil, fmt.Errorf("arena: Fit: nil *Plan")
	case cfg == nil:
		return nil, &ConfigError{Reason: "nil *ModelConfig"}
	case cfg.ModelType != plan.ModelType:
		return nil, &ConfigError{Field: "model_type", Value: clip(cfg.ModelType),
			Reason: fmt.Sprintf("does not match the plan's %q", clip(plan.ModelType))}
	}
	if err := dev.validate(); err != nil {
		return nil, err
	}
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	weights, err := EstimateWeights(cfg, o.weights)
	if err != nil {
		return nil, err
	}
	f, err := newFitter(cfg, dev, o, weights)
	if err != nil {
		return nil, err
	}
	r, err := f.fit(plan)
	if err != nil {
		return nil, err
	}
	r.Largest = f.largest(plan, r)
	if !r.Fits {
		r.Suggestions = f.suggest(plan, r)
	}
	r.Notes = f.notes(plan, r)
	return r, nil
}

// fitParams are FitOptions resolved: every default filled, every value checked.
type fitParams struct {
	utilization    float64
	scope          UtilizationScope
	sampler        SamplerWarmup
	cudaGraphs     CUDAGraphs
	reserveBytes   int64
	weights        WeightOptions
	excludeWeights bool
	// exactWeights is FitOptions.CheckpointWeightBytes (or the sum of
	// CheckpointPooledTensorBytes), -1 when neither is set.
	exactWeights int64
	// weightPadding is the pooled weights' alignment padding, in bytes.
	weightPadding int64
}

// resolve validates the options and fills their defaults.
func (o FitOptions) resolve() (fitParams, error) {
	p := fitParams{utilization: DefaultGPUMemoryUtilization, reserveBytes: DefaultReserveBytes,
		weights: o.Weights, excludeWeights: o.ExcludeWeights, exactWeights: -1}
	if o.CheckpointWeightBytes != nil {
		if *o.CheckpointWeightBytes < 0 {
			return p, &OptionError{Option: "checkpoint_weight_bytes", Value: *o.CheckpointWeightBytes, Reason: "must not be negative"}
		}
		p.exactWeights = *o.CheckpointWeightBytes
	}
	if o.CheckpointPooledTensorBytes != nil {
		const name = "checkpoint_pooled_tensor_bytes"
		for i, n := range o.CheckpointPooledTensorBytes {
			if n < 0 {
				return p, &OptionError{Option: name, Value: n, Reason: fmt.Sprintf("tensor %d must not be negative", i)}
			}
		}
		sum, err := CheckedSum(name, o.CheckpointPooledTensorBytes...)
		if err != nil {
			return p, err
		}
		if p.exactWeights >= 0 && p.exactWeights != sum {
			return p, &OptionError{Option: name, Value: sum,
				Reason: fmt.Sprintf("the tensors sum to %d B but checkpoint_weight_bytes is %d B", sum, p.exactWeights)}
		}
		pooled, err := PooledBytes(o.CheckpointPooledTensorBytes)
		if err != nil {
			return p, err
		}
		p.exactWeights, p.weightPadding = sum, pooled-sum
	}
	var err error
	if p.scope, err = ParseUtilizationScope(string(o.UtilizationScope)); err != nil {
		return p, err
	}
	if p.sampler, err = ParseSamplerWarmup(string(o.SamplerWarmup)); err != nil {
		return p, err
	}
	if p.cudaGraphs, err = ParseCUDAGraphs(string(o.CUDAGraphs)); err != nil {
		return p, err
	}
	if p.cudaGraphs != CUDAGraphsNone {
		p.reserveBytes = DefaultContextReserveBytes // the graphs are sized on their own
	}
	if o.GPUMemoryUtilization != nil {
		if err := ValidateGPUMemoryUtilization(*o.GPUMemoryUtilization); err != nil {
			return p, err
		}
		p.utilization = *o.GPUMemoryUtilization
	}
	if o.ReserveBytes != nil {
		if *o.ReserveBytes < 0 {
			return p, &OptionError{Option: "reserve_bytes", Value: *o.ReserveBytes,
				Reason: fmt.Sprintf("must not be negative; leave it unset for the default %d, set 0 for none", DefaultReserveBytes)}
		}
		p.reserveBytes = *o.ReserveBytes
	}
	return p, nil
}

// fitter holds what a fit and its suggestion searches share: everything
// but the plan (and, for the utilization search, the budget).
type fitter struct {
	cfg     *ModelConfig
	dev     DeviceMemory
	opts    fitParams
	weights *WeightReport
	// processBudget is the budget's result for dev, 0 after its error;
	// noBudget is that error (a *BudgetError or, under
	// UtilizationInstance, a *FreeMemoryError), nil when there is a
	// budget; startupShortfall is the *FreeMemoryError's requested − free.
	processBudget    int64
	noBudget         error
	startupShortfall int64
}

// newFitter is the fitter of cfg and its weights on dev under o, with
// the process budget computed: others holding all of it (a *BudgetError,
// or under UtilizationInstance a *FreeMemoryError) is kept in noBudget,
// not returned. Errors: Budget's and InstanceBudget's other errors.
func newFitter(cfg *ModelConfig, dev DeviceMemory, o fitParams, weights *WeightReport) (*fitter, error) {
	f := &fitter{cfg: cfg, dev: dev, opts: o, weights: weights}
	var err error
	if o.scope == UtilizationInstance {
		f.processBudget, err = InstanceBudget(o.utilization, dev.TotalBytes, dev.FreeBytes)
		var fe *FreeMemoryError
		if errors.As(err, &fe) {
			f.noBudget, f.startupShortfall, err = fe, fe.RequestedBytes-fe.FreeBytes, nil
		}
	} else {
		f.processBudget, err = Budget(o.utilization, dev.TotalBytes, dev.TotalBytes-dev.FreeBytes)
		var be *BudgetError
		if errors.As(err, &be) {
			f.noBudget, err = be, nil
		}
	}
	return f, err
}

// fit computes the report's numbers for plan (no Largest, Suggestions,
// Notes), with the KV layout of the plan's options.
func (f *fitter) fit(plan *Plan) (*FitReport, error) {
	const what = "fit"
	pool, err := NewPoolLayout(plan)
	if err != nil {
		return nil, err
	}
	layout, err := NewKVLayoutFor(f.cfg, plan.Options)
	if err != nil {
		return nil, err
	}
	instance := f.opts.scope == UtilizationInstance
	r := &FitReport{
		ModelType:            plan.ModelType,
		GPUMemoryUtilization: f.opts.utilization,
		UtilizationScope:     f.opts.scope,
		Device:               f.dev,
		BudgetBytes:          utilizationCap(f.opts.utilization, f.dev.TotalBytes),
		ProcessBudgetBytes:   f.processBudget,
		UsedByOthersBytes:    f.dev.TotalBytes - f.dev.FreeBytes,
		Weights:              f.weights,
		ArenaBytes:           pool.Bytes,
		SlabBytes:            plan.SlabBytes,
		ReserveBytes:         f.opts.reserveBytes,
		KV:                   layout,
		KVBytesPerBlock:      layout.BytesPerBlock,
		MaxSeqLen:            plan.Options.MaxSeqLen,
	}
	if instance {
		r.BudgetBytes = utilizationCeil(f.opts.utilization, f.dev.TotalBytes)
	}
	r.WeightSource, r.EstimatedWeightBytes = "estimate", f.weights.Bytes
	weightBytes := f.weights.Bytes
	if f.opts.exactWeights >= 0 {
		r.WeightSource, r.CheckpointWeightBytes, r.WeightPaddingBytes = "checkpoint", f.opts.exactWeights, f.opts.weightPadding
		if weightBytes, err = CheckedAdd(what+" weights and their pool padding", f.opts.exactWeights, f.opts.weightPadding); err != nil {
			return nil, err
		}
	}
	if !f.opts.excludeWeights {
		r.WeightBytes = weightBytes
	}
	r.MinKVBlocks, _ = layout.SeqBlocks(r.MaxSeqLen)
	if r.SeqBytes, err = layout.SeqBytes(r.MaxSeqLen); err != nil {
		return nil, err
	}
	if r.FixedBytesPerSeq, err = layout.FixedBytesPerSeq(r.MaxSeqLen); err != nil {
		return nil, err
	}
	sampler, err := samplerPass(f.opts.sampler, plan, r)
	if err != nil {
		return nil, err
	}
	graphs, err := cudaGraphMemory(f.opts.cudaGraphs, f.cfg, plan, r)
	if err != nil {
		return nil, err
	}
	own, err := CheckedSum(what+" this process's committed bytes", r.WeightBytes, r.ArenaBytes, sampler, r.SlabBytes, reserveInside(r), graphs)
	if err != nil {
		return nil, err
	}
	others := r.UsedByOthersBytes
	if instance {
		others = 0 // vLLM's budget is this process's alone
	}
	if r.RequiredBytes, err = CheckedSum(what+" required bytes", others, own, r.SeqBytes); err != nil {
		return nil, err
	}
	r.KVBudgetBytes = max(r.ProcessBudgetBytes-own, 0)
	if r.SeqBytes > 0 {
		r.MaxConcurrentSeqs = r.KVBudgetBytes / r.SeqBytes
	}
	r.StateSeqs = min(r.MaxConcurrentSeqs, plan.Options.MaxBatchSize)
	r.StateCacheBytes = r.StateSeqs * r.FixedBytesPerSeq // ≤ KVBudgetBytes: cannot overflow
	if r.KVBytesPerBlock > 0 {
		r.KVBlocks = (r.KVBudgetBytes - r.StateCacheBytes) / r.KVBytesPerBlock
		r.KVCacheBytes = r.KVBlocks * r.KVBytesPerBlock // ≤ KVBudgetBytes
		if r.KVTokens, err = CheckedMul(what+" kv tokens", r.KVBlocks, plan.Options.KVBlockSize); err != nil {
			return nil, err
		}
	}
	outside, err := outsideFits(r)
	if err != nil {
		return nil, err
	}
	r.Fits = r.RequiredBytes <= r.BudgetBytes && (!instance || f.noBudget == nil) && outside
	switch {
	case r.Fits:
		r.HeadroomBytes = r.BudgetBytes - r.RequiredBytes
	default:
		r.ShortfallBytes = max(r.RequiredBytes-r.BudgetBytes, f.startupShortfall)
		if !outside {
			r.ShortfallBytes = max(r.ShortfallBytes, r.OutsideRequiredBytes-r.OutsideBudgetBytes)
		}
	}
	return r, nil
}

// largest is the three largest items of RequiredBytes, largest first (ties
// in the order: others, weight groups, buffers in BufferID order, slabs,
// reserve, KV).
func (f *fitter) largest(plan *Plan, r *FitReport) []FitItem {
	var items []FitItem
	push := func(name, kind string, bytes int64) {
		if bytes > 0 {
			items = append(items, FitItem{Name: name, Kind: kind, Bytes: bytes})
		}
	}
	push("used_by_others", "others", r.UsedByOthersBytes)
	switch {
	case f.opts.excludeWeights:
	case f.opts.exactWeights >= 0:
		push("weights", "weights", r.WeightBytes)
	default:
		for _, g := range f.weights.Groups {
			push("weights."+g.Name, "weights", g.Bytes)
		}
	}
	for _, b := range plan.Buffers {
		push(b.ID.String(), "buffer", b.Bytes)
	}
	for _, s := range plan.Slabs {
		push(s.Name, "slab", s.Bytes)
	}
	push("reserve", "reserve", r.ReserveBytes)
	if r.CUDAGraphs == CUDAGraphsEstimated {
		push("cuda_graphs", "cuda_graphs", r.CUDAGraphBytes)
	}
	push("kv.one_sequence", "kv", r.SeqBytes)
	slices.SortStableFunc(items, func(a, b FitItem) int { return cmp.Compare(b.Bytes, a.Bytes) })
	return items[:min(3, len(items))]
}

// LogValue logs the report as a group of its byte counts.
func (r *FitReport) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.Bool("fits", r.Fits),
		slog.String("utilization_scope", string(r.UtilizationScope)),
		slog.Int64("budget_bytes", r.BudgetBytes),
		slog.Int64("process_budget_bytes", r.ProcessBudgetBytes),
		slog.Int64("used_by_others_bytes", r.UsedByOthersBytes),
		slog.Int64("weight_bytes", r.WeightBytes),
		slog.Int64("weight_padding_bytes", r.WeightPaddingBytes),
		slog.Int64("arena_bytes", r.ArenaBytes),
		slog.Int64("slab_bytes", r.SlabBytes),
		slog.Int64("reserve_bytes", r.ReserveBytes),
		slog.Int64("sampler_budget_bytes", r.SamplerBudgetBytes),
		slog.String("cuda_graphs", string(r.CUDAGraphs)),
		slog.Int64("cuda_graph_bytes", r.CUDAGraphBytes),
		slog.Int64("outside_budget_bytes", r.OutsideBudgetBytes),
		slog.Int64("outside_required_bytes", r.OutsideRequiredBytes),
		slog.Int64("kv_budget_bytes", r.KVBudgetBytes),
		slog.Int64("seq_bytes", r.SeqBytes),
		slog.Int64("max_concurrent_seqs", r.MaxConcurrentSeqs),
		slog.Int64("kv_blocks", r.KVBlocks),
		slog.Int64("kv_bytes_per_block", r.KVBytesPerBlock),
		slog.Int64("required_bytes", r.RequiredBytes),
		slog.Int64("headroom_bytes", r.HeadroomBytes),
		slog.Int64("shortfall_bytes", r.ShortfallBytes),
	}
	if s := r.Suggestions; s != nil {
		attrs = append(attrs, slog.Group("suggestions",
			slog.Int64("max_batch_tokens", s.MaxBatchTokens),
			slog.Int64("max_seq_len", s.MaxSeqLen),
			slog.Float64("gpu_memory_utilization", s.GPUMemoryUtilization),
			slog.String("logits_rows", string(s.LogitsRows))))
	}
	return slog.GroupValue(attrs...)
}
