package arena

// KVDType is the KV-cache element type the fit assumes (BF16, 2 bytes).
const KVDType = BF16

// deepseekV4IndexerRatio is the compress ratio of the DeepSeek-V4 layers that
// also run the lightning indexer and cache its keys (vLLM deepseek_v4.py
// builds the indexer only on ratio-4 layers).
const deepseekV4IndexerRatio = 4

// KVBytesPerBlock is the device bytes one paged KV-cache block of
// kvBlockSize tokens takes over all layers (design.md §6), in KVDType:
//   - standard, gated and Mamba-2-hybrid attention: kvBlockSize × full-attention
//     layers × 2 (K and V) × Hkv × D × 2 B. Sliding-window, GDN and Mamba-2
//     layers keep per-sequence state, not blocks, and are not counted.
//   - MLA: kvBlockSize × layers × (kv_lora_rank + qk_rope_head_dim) × 2 B, one
//     latent plus shared rotary key per token per layer (DeepSeek-V2 §2.1).
//   - DeepSeek-V4: Σ over compressed layers of ⌈kvBlockSize / ratio⌉ entries ×
//     (head_dim + index_head_dim on ratio-4 layers) × 2 B: each block holds the
//     compressed latents of its tokens, rounded up to one entry (an
//     over-estimate for ratio > kvBlockSize); the per-sequence sliding window
//     is not counted.
//
// It is 0 for a model without such layers. Errors: an *OptionError for
// kvBlockSize ≤ 0, a *ConfigError for a nil cfg, an *OverflowError.
func KVBytesPerBlock(cfg *ModelConfig, kvBlockSize int64) (int64, error) {
	if cfg == nil {
		return 0, &ConfigError{Reason: "nil *ModelConfig"}
	}
	if kvBlockSize <= 0 {
		return 0, &OptionError{Option: "kv_block_size", Value: kvBlockSize, Reason: "must be positive"}
	}
	const what = "kv bytes per block"
	switch {
	case cfg.MLA != nil:
		w, err := CheckedAdd(what, cfg.MLA.KVLoRARank, cfg.MLA.QKRopeHeadDim)
		if err != nil {
			return 0, err
		}
		return CheckedProduct(what, kvBlockSize, cfg.Counts.Attention(), w, KVDType.Size())
	case cfg.DeepSeekV4 != nil:
		v := cfg.DeepSeekV4
		total := int64(0)
		for _, ratio := range v.CompressRatios {
			if ratio <= 1 {
				continue
			}
			w := cfg.HeadDim
			if ratio == deepseekV4IndexerRatio {
				var err error
				if w, err = CheckedAdd(what, w, v.IndexHeadDim); err != nil {
					return 0, err
				}
			}
			b, err := CheckedProduct(what, ceilDiv(kvBlockSize, ratio), w, KVDType.Size())
			if err != nil {
				return 0, err
			}
			if total, err = CheckedAdd(what, total, b); err != nil {
				return 0, err
			}
		}
		return total, nil
	default:
		return CheckedProduct(what, kvBlockSize, cfg.Counts.FullAttention, 2, cfg.NumKVHeads, cfg.HeadDim, KVDType.Size())
	}
}
