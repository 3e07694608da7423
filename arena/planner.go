package arena

// planner is what every buffer rule reads: the config, its family's shape,
// the resolved options and the decode layout. Arithmetic goes through the
// embedded sizer, whose what PlanFor sets to the buffer or slab being sized.
type planner struct {
	sizer
	cfg   *ModelConfig
	shape modelShape
	opts  Options
	meta  DecodeMetaLayout
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
func (p *planner) hasGDN() bool { return p.shape.gdn != nil && p.cfg.Counts.GDN > 0 }

// hasMamba: at least one Mamba-2 layer.
func (p *planner) hasMamba() bool { return p.shape.mamba != nil && p.cfg.Counts.Mamba2 > 0 }

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
func (p *planner) gdnQKVZ() int64 { return p.shape.gdn.qkvzWidth(&p.sizer) }

// qkvWidth is the per-token width of the fused attention input projection.
// Each family has one attention kind, so "the max over the model's attention
// kinds" (design.md §5) is the width of that kind (attention.qkvWidth:
// gqa, mla, deepseekV4Attention).
func (p *planner) qkvWidth() int64 { return p.shape.attn.qkvWidth(&p.sizer) }

// attnOutWidth is the o_proj input width (attention.outWidth).
func (p *planner) attnOutWidth() int64 { return p.shape.attn.outWidth(&p.sizer) }

// decodeValueDim is the per-head output width the split-K decode kernel
// accumulates (attention.decodeValueDim).
func (p *planner) decodeValueDim() int64 { return p.shape.attn.decodeValueDim() }

// normDim is the longest vector any norm of the model is applied over:
// max of H, the FFN widths, D, the GDN head dims, Mamba-2 d_inner, the
// family's own norm and low-rank widths (modelShape.norms: MLA and
// DeepSeek-V4 q_a_layernorm, kv_a_layernorm, ...) and hc_mult·H (the mHC
// pre-norm over the flattened streams).
func (p *planner) normDim() int64 {
	s := p.shape
	d := max(p.widest(), p.cfg.HeadDim)
	if g := s.gdn; g != nil {
		d = max(d, g.KeyHeadDim, g.ValueHeadDim)
	}
	if m := s.mamba; m != nil {
		d = max(d, m.DInner)
	}
	for _, n := range s.norms {
		d = max(d, n)
	}
	return max(d, p.mul(s.hcMult, p.h()))
}
