package arena

// The KV cache group names: one group per kind of per-sequence memory a
// model has, each one device allocation labelled with its name.
const (
	// KVGroupFullAttention: the paged K and V of full-attention layers
	// (GQA, gated attention, the attention layers of a Mamba-2 or GDN
	// hybrid).
	KVGroupFullAttention = "kv_full_attention"
	// KVGroupMLA: the paged latent of multi-head latent attention, one
	// kv_lora_rank + qk_rope_head_dim vector per token (DeepSeek-V2/V3).
	KVGroupMLA = "kv_mla"
	// KVGroupCompressed: DeepSeek-V4's compressed attention, one latent
	// entry (head_dim, plus index_head_dim indexer keys on ratio-4 layers)
	// per compress_ratio tokens, paged.
	KVGroupCompressed = "kv_compressed"
	// KVGroupSlidingWindow: the sliding-window layers' blocks (gpt-oss K and
	// V; DeepSeek-V4's head_dim latent window in every layer).
	KVGroupSlidingWindow = "kv_sliding_window"
	// KVGroupGDNState: a Gated DeltaNet conv and SSM state per sequence.
	KVGroupGDNState = "state_gdn"
	// KVGroupMamba2State: a Mamba-2 conv and SSM state per sequence.
	KVGroupMamba2State = "state_mamba2"
	// KVGroupCompressorState: DeepSeek-V4's compressor state per sequence.
	KVGroupCompressorState = "state_compressor"
)

// KVCacheCounts is how many blocks and slots a KV cache holds.
type KVCacheCounts struct {
	// Blocks is the paged blocks of kv_block_size tokens, shared by every
	// paged layer (FitReport.KVBlocks at most).
	Blocks int64 `json:"blocks"`
	// SlidingBlocks is the sliding-window blocks, shared by every sliding
	// layer (sequences × each one's sliding blocks).
	SlidingBlocks int64 `json:"sliding_blocks"`
	// Slots is the state slots, one per sequence, in every state group.
	Slots int64 `json:"slots"`
}

// KVCacheGroup is one group of a KV cache: the layers of one kind, laid out
// layer after layer in one allocation of Bytes bytes. Layers are in model
// order; layer i's bytes start at Layers[i].Offset.
type KVCacheGroup struct {
	// Name is one of the KVGroup* names, and the allocation's ledger label.
	Name string `json:"name"`
	// BlockTokens is kv_block_size in tokens; 0 for a state group.
	BlockTokens int64 `json:"block_tokens"`
	// Blocks is the group's blocks (a paged or sliding group) or slots (a
	// state group: a block of a state group is a slot).
	Blocks int64 `json:"blocks"`
	// Window is sliding_window in tokens for the sliding-window group
	// (KVLayout.SlidingWindow), 0 for the others.
	Window int64 `json:"window,omitempty"`
	// Layers are the model layers the group covers, in model order.
	Layers []KVCacheLayer `json:"layers"`
	// Bytes is the group's size in bytes, the sum of its layers'.
	Bytes int64 `json:"bytes"`
}

// KVCacheLayer is one model layer's part of a KV cache group, with the
// strides, in bytes, a kernel needs. With base the group's pointer and B
// the group's Blocks:
//
//   - K and V (Planes 2): the layer is vLLM's FlashAttention tensor [2, B,
//     block_size, Heads, HeadDim] (vllm/v1/attention/backends/flash_attn.py
//     FlashAttentionBackend.get_kv_cache_shape, NHD stride order), so block
//     b's K is at base + Offset + b·BlockStride and its V PlaneStride
//     (= B·BlockStride) further; token t, head h, element d of a block at
//     t·EntryStride + h·HeadStride + d·ElementBytes.
//   - a latent (Planes 1): [B, EntriesPerBlock, HeadDim] (MLA: vLLM
//     vllm/v1/attention/backends/mla/common.py MLACommonBackend
//     get_kv_cache_shape, [num_blocks, block_size, kv_lora_rank +
//     qk_rope_head_dim]); block b at base + Offset + b·BlockStride, entry e
//     at e·EntryStride. A compressed layer's entry holds CompressRatio
//     tokens; on DeepSeek-V4's ratio-4 layers its first head_dim elements
//     are the latent and the last index_head_dim the indexer key.
//   - a state slot (Planes 0): slot s at base + Offset + s·BlockStride,
//     the conv state [ConvShape] = [kernel − 1, conv_dim] (vLLM's "SD"
//     layout, conv_dim contiguous) of ElementBytes elements first, then
//     the SSM state [SSMShape] of SSMElementBytes elements at ConvBytes
//     (vllm/model_executor/layers/mamba/mamba_utils.py
//     MambaStateShapeCalculator.gated_delta_net_state_shape, [nv, dv, dk];
//     mamba2_state_shape, [nheads, head_dim, d_state]); one slot holds
//     every state of the layer, as vLLM's MambaSpec page does
//     (vllm/v1/worker/gpu_model_runner.py _reshape_kv_cache_tensors). A
//     compressor slot (ConvBytes = SSMBytes = 0) is BlockStride bytes of
//     F32 state (vLLM CompressorStateCache).
type KVCacheLayer struct {
	// Layer is the model's layer index (ModelConfig.Layers).
	Layer int64 `json:"layer"`
	// Offset is where the layer starts in the group's allocation; Bytes
	// its size: max(Planes, 1) × Blocks × BlockStride.
	Offset int64 `json:"offset"`
	Bytes  int64 `json:"bytes"`
	// Planes is 2 (K then V), 1 (one latent) or 0 (a state slot).
	Planes int64 `json:"planes"`
	// BlockStride is the bytes from one block (state: slot) to the next
	// within a plane.
	BlockStride int64 `json:"block_stride"`
	// PlaneStride is the bytes from a block's K to its V; 0 unless Planes
	// is 2.
	PlaneStride int64 `json:"plane_stride,omitempty"`
	// EntriesPerBlock is the entries of a block: kv_block_size tokens, or
	// ⌈kv_block_size / CompressRatio⌉ compressed entries; 0 for state.
	EntriesPerBlock int64 `json:"entries_per_block,omitempty"`
	// CompressRatio is the tokens per entry: 1, or a compressed layer's
	// compress_ratio; 0 for state.
	CompressRatio int64 `json:"compress_ratio,omitempty"`
	// EntryStride is the bytes of one entry of one plane, Heads ×
	// HeadStride; 0 for state.
	EntryStride int64 `json:"entry_stride,omitempty"`
	// Heads is the KV heads per entry (1 for a latent) and HeadDim each
	// one's elements; HeadStride is HeadDim × ElementBytes. 0 for state.
	Heads      int64 `json:"heads,omitempty"`
	HeadDim    int64 `json:"head_dim,omitempty"`
	HeadStride int64 `json:"head_stride,omitempty"`
	// ElementBytes is the size of one cached element: the KV cache dtype's,
	// or the conv state's (state), or 4 (compressor state, F32).
	ElementBytes int64 `json:"element_bytes"`
	// ConvShape and ConvBytes are a state slot's conv state; SSMShape,
	// SSMElementBytes and SSMBytes its SSM state, at ConvBytes. Empty or 0
	// elsewhere.
	ConvShape       []int64 `json:"conv_shape,omitempty"`
	ConvBytes       int64   `json:"conv_bytes,omitempty"`
	SSMShape        []int64 `json:"ssm_shape,omitempty"`
	SSMElementBytes int64   `json:"ssm_element_bytes,omitempty"`
	SSMBytes        int64   `json:"ssm_bytes,omitempty"`
}

// KVCacheGroups lays out cfg's KV cache, as layout prices it, for counts:
// one group per kind the model has, in the order paged (KVGroupFullAttention,
// KVGroupMLA or KVGroupCompressed), KVGroupSlidingWindow, KVGroupGDNState,
// KVGroupMamba2State, KVGroupCompressorState. The layers of a kind are those
// whose mixer caches it: full-attention layers for ratio-1 paged caches,
// compressed-attention layers for compressed ones and compressor state,
// sliding and compressed layers for a sliding window, GDN and Mamba-2 layers
// for state.
//
// The element sizes are layout's: KVElementBytes (kv_cache_dtype) for the
// KV, which must price cfg's dimensions at layout's bytes exactly, and the
// conv and SSM state's bytes divided by the elements cfg's dimensions give
// (mamba_ssm_cache_dtype); so the groups follow layout's dtypes, and their
// bytes per block and per sequence are layout's exactly. The groups' total is
// Blocks × layout.BytesPerBlock + SlidingBlocks × layout.SlidingBytesPerBlock
// + Slots × layout.StateBytesPerSeq.
//
// Errors: a *ConfigError for a nil cfg or one lacking a sub-config its family
// reads; a *KVCacheError (ErrKVCacheSpec) for a count ≤ 0 of a kind the model
// has or ≠ 0 of one it has not, a kv_block_size ≤ 0; one that also wraps
// ErrKVCacheMismatch when layout is not cfg's (layer counts, or bytes that
// cfg's dimensions do not divide); an *OverflowError.
func KVCacheGroups(cfg *ModelConfig, layout KVLayout, counts KVCacheCounts) ([]KVCacheGroup, error) {
	if cfg == nil {
		return nil, &ConfigError{Reason: "nil *ModelConfig"}
	}
	if layout.BlockTokens <= 0 {
		return nil, &KVCacheError{Field: "kv_block_size", Asked: layout.BlockTokens, Reason: "must be positive"}
	}
	_, shape, err := shapeOf(cfg)
	if err != nil {
		return nil, err
	}
	if shape.attn == nil {
		return nil, &ConfigError{Field: "model_type", Value: clip(cfg.ModelType), Reason: "has no attention to cache"}
	}
	b := &groupBuilder{sizer: sizer{what: "kv cache groups"}, cfg: cfg, layout: layout, counts: counts, layers: layersByMixer(cfg)}
	kv := shape.attn.kv(&b.sizer)
	b.paged(kv.paged)
	b.sliding(kv)
	b.state(shape)
	b.compressor(kv.paged)
	b.unused()
	if b.err != nil {
		return nil, b.err
	}
	return b.groups, nil
}
