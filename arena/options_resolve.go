package arena

import "fmt"

// Resolve returns o with every unset field set to its default for cfg: a
// zero max_batch_tokens 8192, max_seq_len min(max_position_embeddings,
// 32768) (32768 when the config has none), kv_block_size 16,
// max_batch_size min(256, max_batch_tokens), a nil k_max 3 (a set 0 stays
// 0: no speculative decoding); lora_max_rank stays 0 (no LoRA). Errors: an
// *OptionError naming the option for a negative value, or for a
// max_batch_size larger than max_batch_tokens (a decode step of
// max_batch_size sequences is that many tokens).
func (o Options) Resolve(cfg *ModelConfig) (Options, error) {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"max_batch_tokens", o.MaxBatchTokens},
		{"max_seq_len", o.MaxSeqLen},
		{"kv_block_size", o.KVBlockSize},
		{"max_batch_size", o.MaxBatchSize},
		{"lora_max_rank", o.LoRAMaxRank},
	} {
		if f.v < 0 {
			return Options{}, &OptionError{Option: f.name, Value: f.v, Reason: "must not be negative (0 means the default)"}
		}
	}
	if o.KMax != nil && *o.KMax < 0 {
		return Options{}, &OptionError{Option: "k_max", Value: *o.KMax,
			Reason: fmt.Sprintf("must not be negative; set 0 for no speculative decoding, leave it unset for the default %d", DefaultKMax)}
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
	return o, nil
}
