package arena

import (
	"fmt"
	"strings"
)

// KVDType is the KV-cache element type the fit assumes (BF16, 2 bytes). The
// Mamba-2/GDN convolution state uses it too; the recurrent SSM state does not
// (see SSMStateDType).
const KVDType = BF16

// KVLayout is what a model's KV cache and recurrent state cost, per token,
// per block and per sequence, in bytes. Three kinds of per-sequence memory:
//
//   - paged: layers whose cache grows with the sequence, held in blocks of
//     BlockTokens tokens. Standard, gated and Mamba-2-hybrid attention: the
//     full-attention layers, K and V of Hkv·D each. MLA: every layer, one
//     latent of kv_lora_rank + qk_rope_head_dim (DeepSeek-V2 §2.1).
//     DeepSeek-V4: the compressed layers, one head_dim latent per ratio
//     tokens (+ index_head_dim indexer keys on ratio-4 layers).
//   - sliding: layers that keep only the last SlidingWindow tokens of a
//     sequence (gpt_oss sliding_attention layers, K and V of Hkv·D; every
//     DeepSeek-V4 layer, which keeps a head_dim latent window next to its
//     compressed cache). A sequence of L tokens holds min(L, W) of them, in
//     min(⌈L/b⌉, ⌈W/b⌉ + 1) blocks (a window not aligned to blocks spans one
//     block more).
//   - state: fixed per-sequence state. GDN (vLLM mamba_utils
//     gated_delta_net_state_shape): per layer a conv state [conv_dim,
//     kernel − 1] in KVDType (conv_dim = 2·nk·dk + nv·dv) and an SSM state
//     [nv, dk, dv]; Mamba-2 (mamba2_state_shape): conv [d_inner +
//     2·n_groups·d_state, kernel − 1] in KVDType and SSM [nheads, head_dim,
//     d_state]; the SSM state in SSMStateDType. DeepSeek-V4 compressors
//     (vLLM CompressorStateCache): per compressed layer coff·r pending
//     entries of kv + score state, 2·coff·D F32 each (coff = 2 on ratio-4
//     layers, which also run the indexer's ratio-4 compressor of
//     index_head_dim; else 1).
//
// The KV itself is KVDType (2 B) throughout.
type KVLayout struct {
	// BlockTokens is kv_block_size, the tokens per paged block.
	BlockTokens int64 `json:"block_tokens"`
	// PagedLayers counts the layers with a paged cache.
	PagedLayers int64 `json:"paged_layers"`
	// BytesPerToken is the paged layers' bytes per token. DeepSeek-V4: Σ over
	// compressed layers of ⌈width·2 B / ratio⌉, the long-sequence cost.
	BytesPerToken int64 `json:"bytes_per_token"`
	// BytesPerBlock is the paged layers' bytes per block of BlockTokens
	// tokens (KVBytesPerBlock). DeepSeek-V4 rounds each compressed layer up
	// to ⌈BlockTokens/ratio⌉ entries per block, so it can exceed
	// BlockTokens × BytesPerToken.
	BytesPerBlock int64 `json:"bytes_per_block"`
	// SlidingLayers counts the layers holding a sliding window of
	// SlidingWindow tokens per sequence; SlidingBytesPerToken and
	// SlidingBytesPerBlock are their bytes per token and per block.
	SlidingLayers        int64 `json:"sliding_layers"`
	SlidingWindow        int64 `json:"sliding_window"`
	SlidingBytesPerToken int64 `json:"sliding_bytes_per_token"`
	SlidingBytesPerBlock int64 `json:"sliding_bytes_per_block"`
	// StateLayers counts the GDN and Mamba-2 layers. ConvStateBytesPerSeq,
	// SSMStateBytesPerSeq and CompressorStateBytesPerSeq are one sequence's
	// fixed state by kind; StateBytesPerSeq is their sum.
	StateLayers                int64 `json:"state_layers"`
	ConvStateBytesPerSeq       int64 `json:"conv_state_bytes_per_seq"`
	SSMStateBytesPerSeq        int64 `json:"ssm_state_bytes_per_seq"`
	CompressorStateBytesPerSeq int64 `json:"compressor_state_bytes_per_seq"`
	StateBytesPerSeq           int64 `json:"state_bytes_per_seq"`
	// Notes says what was assumed (the SSM state dtype).
	Notes []string `json:"notes,omitempty"`
}

// SSMStateDType is the recurrent (SSM) state's element size in bytes for
// mamba_ssm_cache_dtype: "bfloat16"/"float16" → 2; "float32" or absent → 4
// (the state accumulates over the whole sequence, so F32 is the safe
// default; vLLM's "auto" would follow the model dtype). An unknown value is
// 4 with a note.
func SSMStateDType(mambaSSMCacheDType string) (bytes int64, note string) {
	switch strings.ToLower(mambaSSMCacheDType) {
	case "bfloat16", "float16", "bf16", "fp16", "half":
		return 2, ""
	case "float32", "fp32", "float":
		return 4, ""
	case "":
		return 4, "mamba_ssm_cache_dtype is absent: the recurrent SSM state is sized as f32"
	default:
		return 4, fmt.Sprintf("mamba_ssm_cache_dtype %q is not known: the recurrent SSM state is sized as f32", clip(mambaSSMCacheDType))
	}
}

// NewKVLayout computes cfg's KV layout for blocks of kvBlockSize tokens:
// the paged and sliding layers and compressor state its family's attention
// caches (attention.kv; gqa, mla and deepseekV4Attention say what per
// token), and the GDN and Mamba-2 state of its recurrent layers. Errors:
// an *OptionError for kvBlockSize ≤ 0, a *ConfigError for a nil cfg or one
// that lacks the sub-config its family reads, an *OverflowError naming "kv
// cache".
func NewKVLayout(cfg *ModelConfig, kvBlockSize int64) (KVLayout, error) {
	if cfg == nil {
		return KVLayout{}, &ConfigError{Reason: "nil *ModelConfig"}
	}
	if kvBlockSize <= 0 {
		return KVLayout{}, &OptionError{Option: "kv_block_size", Value: kvBlockSize, Reason: "must be positive"}
	}
	_, shape, err := shapeOf(cfg)
	if err != nil {
		return KVLayout{}, err
	}
	k := &kvCalc{sizer: sizer{what: "kv cache"}, l: KVLayout{BlockTokens: kvBlockSize}}
	k.attention(shape.attn.kv(&k.sizer))
	k.recurrent(cfg, shape)
	l := &k.l
	l.StateBytesPerSeq = k.add(l.ConvStateBytesPerSeq, l.SSMStateBytesPerSeq, l.CompressorStateBytesPerSeq)
	if k.err != nil {
		return KVLayout{}, k.err
	}
	return k.l, nil
}

// kvCalc is NewKVLayout's layout under construction and its
// overflow-checked arithmetic.
type kvCalc struct {
	sizer
	l KVLayout
}

// attention fills the paged and sliding parts and the compressor state
// from kv. Per layer of a paged group of ratio r and width w: ⌈w·2 B / r⌉
// per token and ⌈BlockTokens/r⌉·w·2 B per block; per sliding layer w·2 B
// per token.
func (k *kvCalc) attention(kv kvShape) {
	l, dt, b := &k.l, KVDType.Size(), k.l.BlockTokens
	for _, g := range kv.paged {
		l.PagedLayers = k.add(l.PagedLayers, g.layers)
		l.BytesPerToken = k.add(l.BytesPerToken, k.mul(g.layers, ceilDiv(k.mul(g.width, dt), g.ratio)))
		l.BytesPerBlock = k.add(l.BytesPerBlock, k.mul(ceilDiv(b, g.ratio), k.mul(g.layers, g.width, dt)))
	}
	if s := kv.sliding; s.layers > 0 {
		l.SlidingLayers, l.SlidingWindow = s.layers, kv.window
		l.SlidingBytesPerToken = k.mul(s.layers, k.mul(s.width, dt))
	}
	l.SlidingBytesPerBlock = k.mul(b, l.SlidingBytesPerToken)
	l.CompressorStateBytesPerSeq = kv.compressorState
}

// recurrent fills the GDN and Mamba-2 conv and SSM state of cfg's
// recurrent layers, with the dims shape gives.
func (k *kvCalc) recurrent(cfg *ModelConfig, shape modelShape) {
	l, dt := &k.l, KVDType.Size()
	gdn := shape.gdn != nil && cfg.Counts.GDN > 0
	mamba := shape.mamba != nil && cfg.Counts.Mamba2 > 0
	if !gdn && !mamba {
		return
	}
	ssm, note := SSMStateDType(cfg.MambaSSMCacheDType)
	if note != "" {
		l.Notes = append(l.Notes, note)
	}
	if gdn {
		g, n := shape.gdn, cfg.Counts.GDN
		convDim := g.convDim(&k.sizer)
		l.StateLayers += n
		l.ConvStateBytesPerSeq = k.add(l.ConvStateBytesPerSeq, k.mul(n, convDim, max(g.ConvKernel-1, 0), dt))
		l.SSMStateBytesPerSeq = k.add(l.SSMStateBytesPerSeq, k.mul(n, g.NumValueHeads, g.KeyHeadDim, g.ValueHeadDim, ssm))
	}
	if mamba {
		m, n := shape.mamba, cfg.Counts.Mamba2
		convDim := m.convDim(&k.sizer)
		l.StateLayers += n
		l.ConvStateBytesPerSeq = k.add(l.ConvStateBytesPerSeq, k.mul(n, convDim, max(m.ConvKernel-1, 0), dt))
		l.SSMStateBytesPerSeq = k.add(l.SSMStateBytesPerSeq, k.mul(n, m.NumHeads, m.HeadDim, m.StateSize, ssm))
	}
}

// SeqBlocks is how many paged and sliding-window blocks one sequence of
// seqLen tokens holds: ⌈seqLen/b⌉ paged (0 without paged layers) and
// min(⌈seqLen/b⌉, ⌈W/b⌉ + 1) sliding (0 without sliding layers).
func (l KVLayout) SeqBlocks(seqLen int64) (paged, sliding int64) {
	if l.BlockTokens <= 0 || seqLen <= 0 {
		return 0, 0
	}
	n := ceilDiv(seqLen, l.BlockTokens)
	if l.BytesPerBlock > 0 {
		paged = n
	}
	if l.SlidingBytesPerBlock > 0 && l.SlidingWindow > 0 {
		sliding = min(n, ceilDiv(l.SlidingWindow, l.BlockTokens)+1)
	}
	return paged, sliding
}

// SeqBytes is one sequence of seqLen tokens: its paged blocks, its sliding
// blocks and its fixed state. Errors: an *OverflowError.
func (l KVLayout) SeqBytes(seqLen int64) (int64, error) {
	paged, sliding := l.SeqBlocks(seqLen)
	p, err := CheckedMul("sequence kv bytes", paged, l.BytesPerBlock)
	if err != nil {
		return 0, err
	}
	s, err := CheckedMul("sequence kv bytes", sliding, l.SlidingBytesPerBlock)
	if err != nil {
		return 0, err
	}
	return CheckedSum("sequence kv bytes", p, s, l.StateBytesPerSeq)
}

// FixedBytesPerSeq is what one sequence of seqLen tokens holds besides its
// paged blocks: its sliding blocks and its state. Errors: an *OverflowError.
func (l KVLayout) FixedBytesPerSeq(seqLen int64) (int64, error) {
	_, sliding := l.SeqBlocks(seqLen)
	s, err := CheckedMul("sequence fixed bytes", sliding, l.SlidingBytesPerBlock)
	if err != nil {
		return 0, err
	}
	return CheckedAdd("sequence fixed bytes", s, l.StateBytesPerSeq)
}

// KVBytesPerBlock is NewKVLayout(cfg, kvBlockSize).BytesPerBlock: the bytes
// one paged KV-cache block of kvBlockSize tokens takes over all paged layers
// (design.md §6), in KVDType:
//   - standard, gated and Mamba-2-hybrid attention: kvBlockSize × full-attention
//     layers × 2 (K and V) × Hkv × D × 2 B;
//   - MLA: kvBlockSize × layers × (kv_lora_rank + qk_rope_head_dim) × 2 B;
//   - DeepSeek-V4: Σ over compressed layers of ⌈kvBlockSize / ratio⌉ entries ×
//     (head_dim + index_head_dim on ratio-4 layers) × 2 B.
//
// Sliding-window and recurrent state are per sequence, not per block (see
// KVLayout). It is 0 for a model without paged layers. Errors: those of
// NewKVLayout.
func KVBytesPerBlock(cfg *ModelConfig, kvBlockSize int64) (int64, error) {
	l, err := NewKVLayout(cfg, kvBlockSize)
	return l.BytesPerBlock, err
}
