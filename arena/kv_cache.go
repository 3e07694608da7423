package arena

import "fmt"

// KVDType is the element type of the GDN and Mamba-2 convolution state
// (vLLM's mamba_cache_dtype auto: the model dtype, 2 bytes for every model
// arena knows) and the KV cache's under kv_cache_dtype auto. The KV
// cache's element type is KVLayout.KVCacheDType, the recurrent SSM
// state's KVLayout.SSMStateDType.
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
//     compressed cache). Under chunked prefill a step appends up to
//     MaxBatchTokens tokens before the oldest leave the window, so a
//     sequence of L tokens holds ⌈min(W − 1 + MaxBatchTokens, L)/b⌉ + 1
//     blocks (SeqBlocks).
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
// The paged and sliding KV is in KVCacheDType (kv_cache_dtype).
type KVLayout struct {
	// BlockTokens is kv_block_size, the tokens per paged block.
	BlockTokens int64 `json:"block_tokens"`
	// MaxBatchTokens is max_batch_tokens, the most tokens one step appends
	// to a sequence (chunked prefill); it sizes the sliding-window blocks.
	MaxBatchTokens int64 `json:"max_batch_tokens"`
	// KVCacheDType is the KV cache's element type, kv_cache_dtype resolved
	// ("bfloat16" for auto on a BF16 model, "fp8_e4m3" for fp8), and
	// KVElementBytes its size in bytes.
	KVCacheDType   string `json:"kv_cache_dtype"`
	KVElementBytes int64  `json:"kv_element_bytes"`
	// SSMStateDType is the recurrent SSM state's element type,
	// mamba_ssm_cache_dtype resolved (see NewKVLayoutFor); "" without GDN
	// or Mamba-2 layers.
	SSMStateDType string `json:"ssm_state_dtype,omitempty"`
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

// NewKVLayout computes cfg's KV layout for blocks of kvBlockSize tokens,
// every other option at its default (max_batch_tokens 8192, kv_cache_dtype
// and mamba_ssm_cache_dtype auto): NewKVLayoutFor(cfg,
// Options{KVBlockSize: kvBlockSize}). Errors: an *OptionError for a
// kvBlockSize outside [1, MaxKVBlockSize], and those of NewKVLayoutFor.
func NewKVLayout(cfg *ModelConfig, kvBlockSize int64) (KVLayout, error) {
	if cfg == nil {
		return KVLayout{}, &ConfigError{Reason: "nil *ModelConfig"}
	}
	if kvBlockSize <= 0 {
		return KVLayout{}, &OptionError{Option: "kv_block_size", Value: kvBlockSize, Reason: fmt.Sprintf("must be in [1, %d]", MaxKVBlockSize)}
	}
	return NewKVLayoutFor(cfg, Options{KVBlockSize: kvBlockSize})
}

// NewKVLayoutFor computes cfg's KV layout under the serving options opts
// (resolved first by Options.Resolve, so a Plan's Options and unset ones
// both do): the paged and sliding layers and compressor state its family's
// attention caches (attention.kv; gqa, mla and deepseekV4Attention say
// what per token) in kv_cache_dtype, in blocks of kv_block_size tokens,
// the sliding windows sized for max_batch_tokens, and the GDN and Mamba-2
// state of its recurrent layers with the SSM state in
// mamba_ssm_cache_dtype. vLLM resolves mamba_ssm_cache_dtype auto per
// model, and so does this: the config's mamba_ssm_cache_dtype when it
// states one, else float32 for Mamba-2 layers (its NemotronH hook,
// vllm/model_executor/models/config.py
// NemotronHForCausalLMConfig.update_mamba_ssm_cache_dtype, default
// "float32": "only float32 is known to have no accuracy issues"), else the
// model dtype for GDN layers (vllm/model_executor/layers/mamba/mamba_utils.py
// MambaStateDtypeCalculator._mamba_state_dtype: the conv state's dtype),
// with a note in Notes. Errors: a *ConfigError for a nil cfg or one that
// lacks the sub-config its family reads, Resolve's errors, an
// *OverflowError naming "kv cache".
func NewKVLayoutFor(cfg *ModelConfig, opts Options) (KVLayout, error) {
	if cfg == nil {
		return KVLayout{}, &ConfigError{Reason: "nil *ModelConfig"}
	}
	_, shape, err := shapeOf(cfg)
	if err != nil {
		return KVLayout{}, err
	}
	o, err := opts.Resolve(cfg)
	if err != nil {
		return KVLayout{}, err
	}
	k := &kvCalc{sizer: sizer{what: "kv cache"}, l: KVLayout{BlockTokens: o.KVBlockSize, MaxBatchTokens: o.MaxBatchTokens}}
	k.l.KVCacheDType, k.l.KVElementBytes = o.KVCacheDType.Element(cfg)
	k.attention(shape.attn.kv(&k.sizer))
	k.recurrent(cfg, shape, o.MambaSSMCacheDType)
	l := &k.l
	l.StateBytesPerSeq = k.add(l.ConvStateBytesPerSeq, l.SSMStateBytesPerSeq, l.CompressorStateBytesPerSeq)
	if k.err != nil {
		return KVLayout{}, k.err
	}
	return k.l, nil
}

// kvCalc is NewKVLayoutFor's layout under construction and its
// overflow-checked arithmetic.
type kvCalc struct {
	sizer
	l KVLayout
}

// attention fills the paged and sliding parts and the compressor state
// from kv, with e = KVElementBytes. Per layer of a paged group of ratio r
// and width w: ⌈w·e / r⌉ per token and ⌈BlockTokens/r⌉·w·e per block; per
// sliding layer w·e per token.
func (k *kvCalc) attention(kv kvShape) {
	l, dt, b := &k.l, k.l.KVElementBytes, k.l.BlockTokens
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
// recurrent layers, with the dims shape gives, the SSM state in ssmDType
// as ssmStateElement resolves it.
func (k *kvCalc) recurrent(cfg *ModelConfig, shape modelShape, ssmDType SSMCacheDType) {
	l, dt := &k.l, KVDType.Size()
	gdn := shape.gdn != nil && cfg.Counts.GDN > 0
	mamba := shape.mamba != nil && cfg.Counts.Mamba2 > 0
	if !gdn && !mamba {
		return
	}
	name, ssm, note := ssmStateElement(cfg, ssmDType, mamba)
	l.SSMStateDType = name
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
// ⌈min(W − 1 + MaxBatchTokens, seqLen)/b⌉ + 1 sliding (0 without sliding
// layers), vLLM's reservation under chunked prefill
// (vllm/v1/kv_cache_interface.py SlidingWindowSpec.max_memory_usage_bytes):
// a step may append MaxBatchTokens tokens to the W − 1 the window keeps,
// and a window that does not start on a block boundary spans one block
// more. A MaxBatchTokens ≤ 0 counts as 1 (decode). This is the one place
// the sliding-window rule lives.
func (l KVLayout) SeqBlocks(seqLen int64) (paged, sliding int64) {
	if l.BlockTokens <= 0 || seqLen <= 0 {
		return 0, 0
	}
	if l.BytesPerBlock > 0 {
		paged = ceilDiv(seqLen, l.BlockTokens)
	}
	if l.SlidingBytesPerBlock > 0 && l.SlidingWindow > 0 {
		tokens, m := seqLen, max(l.MaxBatchTokens, 1)
		// W − 1 + m < L, compared without overflow; the sum is then below L.
		if l.SlidingWindow-1 < seqLen-m {
			tokens = l.SlidingWindow - 1 + m
		}
		sliding = ceilDiv(tokens, l.BlockTokens) + 1
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
// (design.md §6) under kv_cache_dtype auto, e = 2 bytes (the model dtype):
//   - standard, gated and Mamba-2-hybrid attention: kvBlockSize × full-attention
//     layers × 2 (K and V) × Hkv × D × e;
//   - MLA: kvBlockSize × layers × (kv_lora_rank + qk_rope_head_dim) × e;
//   - DeepSeek-V4: Σ over compressed layers of ⌈kvBlockSize / ratio⌉ entries ×
//     (head_dim + index_head_dim on ratio-4 layers) × e.
//
// Sliding-window and recurrent state are per sequence, not per block (see
// KVLayout). It is 0 for a model without paged layers. Errors: those of
// NewKVLayout.
func KVBytesPerBlock(cfg *ModelConfig, kvBlockSize int64) (int64, error) {
	l, err := NewKVLayout(cfg, kvBlockSize)
	return l.BytesPerBlock, err
}
