package arena

import (
	"errors"
	"fmt"
)

// ErrKVCacheSpec is wrapped by every *KVCacheError: a KV cache asked with
// counts the fit does not allow, or a spec whose numbers do not add up.
var ErrKVCacheSpec = errors.New("arena: invalid kv cache spec")

// ErrKVCacheMismatch is wrapped by the *KVCacheError of a KV cache asked
// for one model with the fit, layout or arena of another.
var ErrKVCacheMismatch = errors.New("arena: kv cache spec of another model")

// KVCacheError is a KV cache spec refused: what was asked (Field, Asked),
// what was available, and why. It unwraps to ErrKVCacheSpec, and also to
// ErrKVCacheMismatch when Mismatch is set.
type KVCacheError struct {
	// Field names what is wrong: "blocks", "seqs", "slots",
	// "sliding_blocks", "kv_block_size", "model_type", a layout field
	// ("bytes_per_block"), or a spec path ("groups[1].layers[3].offset").
	Field string
	// Asked is the value asked (or found); Available what the fit or the
	// model allows (or expects), when that is a number.
	Asked, Available int64
	// Reason says what to change.
	Reason string
	// Mismatch: the spec, fit or layout is another model's.
	Mismatch bool
}

// Error is "arena: kv cache: FIELD ASKED (available AVAILABLE): REASON".
func (e *KVCacheError) Error() string {
	return fmt.Sprintf("arena: kv cache: %s %d (available %d): %s", e.Field, e.Asked, e.Available, e.Reason)
}

// Unwrap returns ErrKVCacheSpec, and ErrKVCacheMismatch when Mismatch is set.
func (e *KVCacheError) Unwrap() []error {
	if e.Mismatch {
		return []error{ErrKVCacheSpec, ErrKVCacheMismatch}
	}
	return []error{ErrKVCacheSpec}
}

// KVCacheRequest asks NewKVCacheSpec for a cache smaller than the fit's. A
// nil field takes the fit's value; a set one must be in [1, the fit's].
type KVCacheRequest struct {
	// Blocks is the paged blocks; nil means FitReport.KVBlocks.
	Blocks *int64
	// Seqs is the sequences the sliding-window blocks and state slots are
	// set aside for; nil means FitReport.StateSeqs.
	Seqs *int64
}

// KVCacheSpec is a model's KV cache as Manager.BuildKVCache allocates it:
// its groups, each one allocation of Bytes bytes, laid out by
// KVCacheGroups. Build one with NewKVCacheSpec; Validate checks one made
// or changed by hand.
type KVCacheSpec struct {
	// ModelType is the model's model_type; BlockTokens its kv_block_size.
	ModelType   string `json:"model_type"`
	BlockTokens int64  `json:"block_tokens"`
	// Seqs is the sequences the sliding-window blocks and state slots are
	// for (0 when the model has neither); SlidingBlocksPerSeq the sliding
	// blocks each one holds at max_seq_len.
	Seqs                int64 `json:"seqs"`
	SlidingBlocksPerSeq int64 `json:"sliding_blocks_per_seq"`
	// Counts are the blocks and slots of the groups.
	Counts KVCacheCounts `json:"counts"`
	// Groups are the allocations, in KVCacheGroups' order.
	Groups []KVCacheGroup `json:"groups"`
	// Bytes is the groups' total in bytes. For the fit's counts it equals
	// FitReport.KVCacheBytes + FitReport.StateCacheBytes.
	Bytes int64 `json:"bytes"`
}

// NewKVCacheSpec is cfg's KV cache with the fit's counts, or the fewer req
// asks: blocks = fit.KVBlocks (paged), sequences = fit.StateSeqs, each
// holding the sliding-window blocks the fit set aside per sequence
// ((FitReport.FixedBytesPerSeq − KV.StateBytesPerSeq) /
// KV.SlidingBytesPerBlock: the fit's rule, KVLayout.FixedBytesPerSeq) and
// one state slot. Its Bytes is blocks × KV.BytesPerBlock + sequences ×
// FixedBytesPerSeq, which for the fit's counts is KVCacheBytes +
// StateCacheBytes, the fit's KV memory, exactly.
//
// Errors: a *ConfigError for a nil cfg; a *KVCacheError (ErrKVCacheSpec) for
// a nil fit, a set count ≤ 0 or above the fit's, or a fit that leaves no
// block or sequence for a kind the model caches (the fit does not fit: see
// its Suggestions); one that also wraps ErrKVCacheMismatch when fit is
// another model's; an *OverflowError.
func NewKVCacheSpec(cfg *ModelConfig, fit *FitReport, req KVCacheRequest) (*KVCacheSpec, error) {
	switch {
	case cfg == nil:
		return nil, &ConfigError{Reason: "nil *ModelConfig"}
	case fit == nil:
		return nil, &KVCacheError{Field: "fit", Reason: "nil *FitReport: fit the model first (Fit, Manager.Preflight)"}
	case fit.ModelType != cfg.ModelType:
		return nil, &KVCacheError{Field: "model_type", Mismatch: true,
			Reason: fmt.Sprintf("the fit is of model_type %q, the config %q", clip(fit.ModelType), clip(cfg.ModelType))}
	}
	l := fit.KV
	hasSeqs := l.StateBytesPerSeq > 0 || (l.SlidingBytesPerBlock > 0 && l.SlidingWindow > 0)
	blocks, err := requested("blocks", req.Blocks, fit.KVBlocks, l.BytesPerBlock > 0,
		fmt.Sprintf("the fit's KV budget of %d B holds no block of %d B", fit.KVBudgetBytes, l.BytesPerBlock))
	if err != nil {
		return nil, err
	}
	seqs, err := requested("seqs", req.Seqs, fit.StateSeqs, hasSeqs,
		fmt.Sprintf("the fit's KV budget of %d B holds no sequence of %d B", fit.KVBudgetBytes, fit.SeqBytes))
	if err != nil {
		return nil, err
	}
	s := &KVCacheSpec{ModelType: cfg.ModelType, BlockTokens: l.BlockTokens, Seqs: seqs}
	if l.SlidingBytesPerBlock > 0 && l.SlidingWindow > 0 {
		fixed := fit.FixedBytesPerSeq - l.StateBytesPerSeq
		if fixed < 0 || fixed%l.SlidingBytesPerBlock != 0 {
			return nil, &KVCacheError{Field: "fixed_bytes_per_seq", Asked: fit.FixedBytesPerSeq, Available: l.SlidingBytesPerBlock, Mismatch: true,
				Reason: fmt.Sprintf("less the state of %d B, not a whole number of sliding blocks: the fit does not add up", l.StateBytesPerSeq)}
		}
		s.SlidingBlocksPerSeq = fixed / l.SlidingBytesPerBlock
		if s.Counts.SlidingBlocks, err = CheckedMul("kv cache sliding blocks", seqs, s.SlidingBlocksPerSeq); err != nil {
			return nil, err
		}
	}
	s.Counts.Blocks = blocks
	if l.StateBytesPerSeq > 0 {
		s.Counts.Slots = seqs
	}
	if s.Groups, err = KVCacheGroups(cfg, l, s.Counts); err != nil {
		return nil, err
	}
	for _, g := range s.Groups {
		if s.Bytes, err = CheckedAdd("kv cache bytes", s.Bytes, g.Bytes); err != nil {
			return nil, err
		}
	}
	paged, err := CheckedMul("kv cache bytes", blocks, l.BytesPerBlock)
	if err != nil {
		return nil, err
	}
	fixed, err := CheckedMul("kv cache bytes", seqs, fit.FixedBytesPerSeq)
	if err != nil {
		return nil, err
	}
	want, err := CheckedAdd("kv cache bytes", paged, fixed)
	if err != nil {
		return nil, err
	}
	if want != s.Bytes {
		return nil, &KVCacheError{Field: "bytes", Asked: s.Bytes, Available: want, Mismatch: true,
			Reason: "the groups do not add up to blocks × bytes_per_block + seqs × fixed_bytes_per_seq: the fit is not this model's"}
	}
	return s, nil
}

// requested is the count field takes: the fit's (available) when asked is
// nil, else *asked, which must be in [1, available]. A kind the model does
// not cache (used false) takes 0, whatever is asked if it is in range;
// empty explains an available of 0.
func requested(field string, asked *int64, available int64, used bool, empty string) (int64, error) {
	if asked == nil {
		if used && available <= 0 {
			return 0, &KVCacheError{Field: field, Available: available, Reason: empty +
				": the model does not fit; lower max_seq_len or max_batch_tokens, or raise gpu_memory_utilization"}
		}
		if !used {
			return 0, nil
		}
		return available, nil
	}
	switch n := *asked; {
	case n <= 0:
		return 0, &KVCacheError{Field: field, Asked: n, Available: available, Reason: "must be positive; leave it unset for the fit's"}
	case n > available:
		return 0, &KVCacheError{Field: field, Asked: n, Available: available, Reason: "more than the fit allows; ask at most the fit's, or refit with more memory"}
	case !used:
		return 0, nil
	default:
		return n, nil
	}
}
