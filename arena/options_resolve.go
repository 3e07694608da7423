package arena

import "fmt"

// Resolve returns o with every zero field set to its default for cfg:
// max_batch_tokens 8192, max_seq_len min(max_position_embeddings, 32768)
// (32768 when the config has none), kv_block_size 16, max_batch_size 256,
// (at most max_batch_tokens), k_max 3; lora_max_rank stays 0 (no LoRA). Errors: an *OptionError naming
// the option for a negative value, or for a max_batch_size larger than
// max_batch_tokens (a decode step of max_batch_size sequences is that many tokens).
func (o Options) Resolve(cfg *ModelConfig) (Options, error) {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"max_batch_tokens", o.MaxBatchTokens},
		{"max_seq_len", o.MaxSeqLen},
		{"kv_block_size", o.KVBlockSize},
		{"max_batch_size", o.MaxBatchSize},
		{"k_max", o.KMax},
		{"lora_max_rank", o.LoRAMaxRank},
	} {
		if f.v < 0 {
			return Options{}, &OptionError{Option: f.name, Value: f.v, Reason: "must not be negative (0 means the default)"}
		}
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
	orDefault(&o.KMax, def.KMax)
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
