package arena

import "fmt"

// Resolve returns o with every unset field set to its default for cfg and
// every set one checked: a zero max_batch_tokens 8192, max_seq_len
// min(max_position_embeddings, 32768) (32768 when the config has none),
// kv_block_size 16, max_batch_size min(256, max_batch_tokens), a nil k_max
// 3 (a set 0 stays 0: no speculative decoding), logits_rows "all",
// kv_cache_dtype and mamba_ssm_cache_dtype "auto" (named values parsed to
// their canonical names); lora_max_rank stays 0 (no LoRA).
//
// Errors: an *OptionError naming the option and its accepted range for a
// negative value, a kv_block_size above MaxKVBlockSize, a lora_max_rank
// above MaxLoRAMaxRank, a k_max above MaxKMax, a max_batch_size larger
// than max_batch_tokens (a decode step of max_batch_size sequences is that
// many tokens), an unknown logits_rows, kv_cache_dtype or
// mamba_ssm_cache_dtype; a *MaxSeqLenError (errors.Is
// ErrMaxSeqLenPastLimit) for a max_seq_len above cfg's MaxSeqLenLimit
// unless AllowLongMaxSeqLen.
func (o Options) Resolve(cfg *ModelConfig) (Options, error) {
	for _, f := range []struct {
		name string
		v    int64
		most int64 // 0: no upper bound
	}{
		{"max_batch_tokens", o.MaxBatchTokens, 0},
		{"max_seq_len", o.MaxSeqLen, 0},
		{"kv_block_size", o.KVBlockSize, MaxKVBlockSize},
		{"max_batch_size", o.MaxBatchSize, 0},
		{"lora_max_rank", o.LoRAMaxRank, MaxLoRAMaxRank},
	} {
		switch {
		case f.v < 0:
			return Options{}, &OptionError{Option: f.name, Value: f.v, Reason: "must not be negative (0 means the default)"}
		case f.most > 0 && f.v > f.most:
			return Options{}, &OptionError{Option: f.name, Value: f.v, Reason: fmt.Sprintf("must be in [0, %d] (0 means the default)", f.most)}
		}
	}
	if o.KMax != nil && (*o.KMax < 0 || *o.KMax > MaxKMax) {
		return Options{}, &OptionError{Option: "k_max", Value: *o.KMax,
			Reason: fmt.Sprintf("must be in [0, %d]; set 0 for no speculative decoding, leave it unset for the default %d", MaxKMax, DefaultKMax)}
	}
	var err error
	if o.LogitsRows, err = parseLogitsRows(o.LogitsRows); err != nil {
		return Options{}, err
	}
	if o.KVCacheDType, err = ParseKVCacheDType(string(o.KVCacheDType)); err != nil {
		return Options{}, err
	}
	if o.MambaSSMCacheDType, err = ParseSSMCacheDType(string(o.MambaSSMCacheDType)); err != nil {
		return Options{}, err
	}
	def := DefaultOptions()
	orDefault := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	orDefault(&o.MaxBatchTokens, def.MaxBatchTokens)
	orDefault(&o.KVBlockSize, def.KVBlockSize)
	// The default max_batch_size never exceeds max_batch_tokens: a decode
	// step of max_batch_size sequences is that many tokens.
	orDefault(&o.MaxBatchSize, min(def.MaxBatchSize, o.MaxBatchTokens))
	if o.KMax == nil {
		o.KMax = def.KMax
	} else {
		o.KMax = new(*o.KMax) // the plan's own copy: the caller may reuse its variable
	}
	seqCap := int64(DefaultMaxSeqLenCap)
	if cfg != nil && cfg.MaxPositionEmbeddings > 0 {
		seqCap = min(seqCap, cfg.MaxPositionEmbeddings)
	}
	orDefault(&o.MaxSeqLen, seqCap)
	if o.MaxBatchSize > o.MaxBatchTokens {
		return Options{}, &OptionError{Option: "max_batch_size", Value: o.MaxBatchSize,
			Reason: fmt.Sprintf("exceeds max_batch_tokens (%d)", o.MaxBatchTokens)}
	}
	if limit, source := cfg.MaxSeqLenLimit(); limit > 0 && o.MaxSeqLen > limit && !o.AllowLongMaxSeqLen {
		return Options{}, &MaxSeqLenError{MaxSeqLen: o.MaxSeqLen, Limit: limit, LimitSource: source}
	}
	return o, nil
}

// parseLogitsRows is r as LogitsAll or LogitsSampled ("" is LogitsAll).
// Errors: an *OptionError for "logits_rows".
func parseLogitsRows(r LogitsRows) (LogitsRows, error) {
	switch r {
	case "", LogitsAll:
		return LogitsAll, nil
	case LogitsSampled:
		return LogitsSampled, nil
	}
	return "", &OptionError{Option: "logits_rows", Value: clip(string(r)), Reason: `want "all" or "sampled"`}
}

// logitsRows is how many rows the logits buffer holds under the resolved
// options o: max_batch_tokens for LogitsAll; min(max_batch_tokens,
// max_batch_size·(1 + k_max)) for LogitsSampled, computed through s.
func (o Options) logitsRows(s *sizer) int64 {
	if o.LogitsRows != LogitsSampled {
		return o.MaxBatchTokens
	}
	return min(o.MaxBatchTokens, s.mul(o.MaxBatchSize, s.add(1, *o.KMax)))
}
