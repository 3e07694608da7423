package arena

// planner is what every buffer rule reads: the config, the resolved options
// and the decode layout. Arithmetic goes through mul and add, which keep the
// first overflow in err (naming what is being sized) and return 0 after it.
type planner struct {
	cfg  *ModelConfig
	opts Options
	meta DecodeMetaLayout
	what string // the buffer or slab being sized, named by overflow errors
	err  error
}

// mul is the overflow-checked product of xs.
func (p *planner) mul(xs ...int64) int64 {
	if p.err != nil {
		return 0
	}
	v, err := CheckedProduct(p.what, xs...)
	p.err = err
	return v
}

// add is the overflow-checked sum of xs.
func (p *planner) add(xs ...int64) int64 {
	if p.err != nil {
		return 0
	}
	v, err := CheckedSum(p.what, xs...)
	p.err = err
	return v
}

// m is M, max_batch_tokens.
func (p *planner) m() int64 { return p.opts.MaxBatchTokens }

// h is H, hidden_size.
func (p *planner) h() int64 { return p.cfg.HiddenSize }

// hasAttention: any softmax-attention layer (full, sliding or compressed).
func (p *planner) hasAttention() bool { return p.cfg.Counts.Attention() > 0 }

// hasMoE: routed experts in at least one layer.
func (p *planner) hasMoE() bool { return p.cfg.NumExperts > 0 && p.cfg.Counts.MoE > 0 }

// hasGDN: at least one Gated DeltaNet layer.
func (p *planner) hasGDN() bool { return p.cfg.GDN != nil && p.cfg.Counts.GDN > 0 }

// hasMamba: at least one Mamba-2 layer.
func (p *planner) hasMamba() bool { return p.cfg.Mamba != nil && p.cfg.Counts.Mamba2 > 0 }

// ffnWidth is the widest FFN intermediate of any dense MLP, routed expert or
// shared expert: max(I, Im, shared). It stands in for "I" wherever a buffer
// must hold any FFN's activations (fp8_act, lora_*, q2_*).
//
// intermediate_size counts only when a layer has a dense MLP: Qwen3-Next
// gives one (5120) that no layer of the model uses (decoder_sparse_step 1,
// no mlp_only_layers), while its experts are 512 wide.
func (p *planner) ffnWidth() int64 {
	c := p.cfg
	w := c.SharedExpertIntermediateSize
	if p.hasMoE() {
		w = max(w, c.MoEIntermediateSize)
	}
	if c.Counts.DenseMLP > 0 {
		w = max(w, c.IntermediateSize)
	}
	return w
}

// widest is max(H, ffnWidth): the widest GEMM input of a layer.
func (p *planner) widest() int64 { return max(p.h(), p.ffnWidth()) }

// gdnQKVZ is in_proj_qkvz's width, 2·nk·dk + 2·nv·dv (modeling_qwen3_next.py:
// query and key of key_dim = nk·dk, value and z of value_dim = nv·dv).
func (p *planner) gdnQKVZ() int64 {
	g := p.cfg.GDN
	return p.add(p.mul(2, g.NumKeyHeads, g.KeyHeadDim), p.mul(2, g.NumValueHeads, g.ValueHeadDim))
}

// qkvWidth is the per-token width of the fused attention input projection.
// Each family has one attention kind, so "the max over the model's attention
// kinds" (design.md §5) is the width of that kind:
//   - standard GQA: (Hq + 2·Hkv)·D (q_proj, k_proj, v_proj);
//   - gated (qwen3_next, modeling_qwen3_next.py Qwen3NextAttention): q_proj
//     emits query and output gate, so (2·Hq + 2·Hkv)·D;
//   - MLA (modeling_deepseek_v3.py DeepseekV3Attention): the query heads from
//     q_b_proj (or q_proj), Hq·(qk_nope_head_dim + qk_rope_head_dim), plus
//     kv_a_proj_with_mqa's output, the latent kv_lora_rank and the shared
//     rotary key qk_rope_head_dim. The prefill-only kv_b_proj expansion is
//     not part of it.
//   - DeepSeek-V4 (vLLM deepseek_v4.py): wq_b emits Hq·head_dim and wkv the
//     Hkv (= 1) shared latent head of head_dim (K = V), so (Hq + Hkv)·D.
func (p *planner) qkvWidth() int64 {
	c := p.cfg
	hq, hkv, d := c.NumAttentionHeads, c.NumKVHeads, c.HeadDim
	switch {
	case c.MLA != nil:
		return p.add(p.mul(hq, d), c.MLA.KVLoRARank, c.MLA.QKRopeHeadDim)
	case c.DeepSeekV4 != nil:
		return p.mul(p.add(hq, hkv), d)
	case c.GatedAttention:
		return p.mul(p.add(p.mul(2, hq), p.mul(2, hkv)), d)
	default:
		return p.mul(p.add(hq, p.mul(2, hkv)), d)
	}
}

// attnOutWidth is the o_proj input width: Hq·v_head_dim for MLA, else Hq·D.
func (p *planner) attnOutWidth() int64 {
	c := p.cfg
	if c.MLA != nil {
		return p.mul(c.NumAttentionHeads, c.MLA.VHeadDim)
	}
	return p.mul(c.NumAttentionHeads, c.HeadDim)
}

// decodeValueDim is the per-head output width the split-K decode kernel
// accumulates: kv_lora_rank for MLA (absorbed decode attends over the latent,
// as FlashMLA), else D.
func (p *planner) decodeValueDim() int64 {
	if p.cfg.MLA != nil {
		return p.cfg.MLA.KVLoRARank
	}
	return p.cfg.HeadDim
}

// normDim is the longest vector any norm of the model is applied over:
// max of H, the FFN widths, D, the GDN head dims, Mamba-2 d_inner, the MLA
// and DeepSeek-V4 low ranks (q_a_layernorm, kv_a_layernorm) and hc_mult·H
// (the mHC pre-norm over the flattened streams).
func (p *planner) normDim() int64 {
	c := p.cfg
	d := max(p.widest(), c.HeadDim)
	if g := c.GDN; g != nil {
		d = max(d, g.KeyHeadDim, g.ValueHeadDim)
	}
	if m := c.Mamba; m != nil {
		d = max(d, m.DInner)
	}
	if m := c.MLA; m != nil {
		d = max(d, m.QLoRARank, m.KVLoRARank, m.VHeadDim)
	}
	if v := c.DeepSeekV4; v != nil {
		d = max(d, v.QLoRARank, v.OLoRARank, p.mul(v.HCMult, p.h()))
	}
	return d
}
