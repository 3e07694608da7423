package arena

// mla is multi-head latent attention (modeling_deepseek_v3.py
// DeepseekV3Attention): hq query heads of d = qk_nope_head_dim +
// qk_rope_head_dim, keys and values from one cached latent of kv_lora_rank
// plus a shared rotary key of qk_rope_head_dim, in every one of layers.
type mla struct {
	hq, d, layers int64
	m             MLAConfig
}

// newMLA is c's attention as MLA of ranks m.
func newMLA(c *ModelConfig, m MLAConfig) mla {
	return mla{hq: c.NumAttentionHeads, d: c.HeadDim, layers: c.Counts.Attention(), m: m}
}

// qkvWidth is the query heads from q_b_proj (or q_proj), Hq·(qk_nope_head_dim
// + qk_rope_head_dim), plus kv_a_proj_with_mqa's output, the latent
// kv_lora_rank and the shared rotary key qk_rope_head_dim. The prefill-only
// kv_b_proj expansion is not part of it.
func (a mla) qkvWidth(s *sizer) int64 {
	return s.add(s.mul(a.hq, a.d), a.m.KVLoRARank, a.m.QKRopeHeadDim)
}

// outWidth is o_proj's input, Hq·v_head_dim.
func (a mla) outWidth(s *sizer) int64 { return s.mul(a.hq, a.m.VHeadDim) }

// decodeValueDim is kv_lora_rank: absorbed decode attends over the latent,
// as FlashMLA does.
func (a mla) decodeValueDim() int64 { return a.m.KVLoRARank }

// kv: every layer caches one latent of kv_lora_rank + qk_rope_head_dim per
// token (DeepSeek-V2 §2.1), paged.
func (a mla) kv(s *sizer) kvShape {
	width := s.add(a.m.KVLoRARank, a.m.QKRopeHeadDim)
	return kvShape{paged: []kvLayers{{layers: a.layers, width: width, ratio: 1}}}
}

// norms are the widths norm_unit_w must cover for MLA: q_lora_rank
// (q_a_layernorm), kv_lora_rank (kv_a_layernorm) and v_head_dim.
func (a mla) norms() []int64 { return []int64{a.m.QLoRARank, a.m.KVLoRARank, a.m.VHeadDim} }

// mla adds n MLA blocks (modeling_deepseek_v3.py DeepseekV3Attention):
// q_a_proj [H, q_lora_rank], q_a_layernorm, q_b_proj [q_lora_rank,
// Hq·(nope+rope)] (q_proj [H, Hq·(nope+rope)] when q_lora_rank is null),
// kv_a_proj_with_mqa [H, kv_lora_rank + rope], kv_a_layernorm
// [kv_lora_rank], kv_b_proj [kv_lora_rank, Hq·(nope + v)], o_proj [Hq·v, H],
// of ranks m.
func (w *weightBuilder) mla(p string, n int64, m *MLAConfig) {
	c := w.cfg
	h, hq := c.HiddenSize, c.NumAttentionHeads
	const g = "attention"
	qOut := w.mul(hq, w.add(m.QKNopeHeadDim, m.QKRopeHeadDim))
	if m.QLoRARank > 0 {
		w.t(p+"self_attn.q_a_proj", g, kindLinear, n, h, m.QLoRARank)
		w.t(p+"self_attn.q_a_layernorm", g, kindVector, n, m.QLoRARank)
		w.t(p+"self_attn.q_b_proj", g, kindLinear, n, m.QLoRARank, qOut)
	} else {
		w.t(p+"self_attn.q_proj", g, kindLinear, n, h, qOut)
	}
	w.t(p+"self_attn.kv_a_proj_with_mqa", g, kindLinear, n, h, w.add(m.KVLoRARank, m.QKRopeHeadDim))
	w.t(p+"self_attn.kv_a_layernorm", g, kindVector, n, m.KVLoRARank)
	w.t(p+"self_attn.kv_b_proj", g, kindLinear, n, m.KVLoRARank, w.mul(hq, w.add(m.QKNopeHeadDim, m.VHeadDim)))
	w.t(p+"self_attn.o_proj", g, kindLinear, n, w.mul(hq, m.VHeadDim), h)
}
