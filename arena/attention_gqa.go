package arena

// gqa is grouped-query softmax attention (modeling_llama.py LlamaAttention):
// hq query heads and hkv key/value heads of d each, over the whole sequence
// (full layers) or its last window tokens (sliding layers). Gated attention
// (modeling_qwen3_next.py Qwen3NextAttention) also projects an output gate
// of hq·d from q_proj.
type gqa struct {
	hq, hkv, d    int64
	gated         bool
	full, sliding int64 // layer counts
	window        int64 // sliding_window, in tokens
}

// newGQA is c's attention as GQA: Hq, Hkv, D, GatedAttention, the full and
// sliding layer counts and sliding_window.
func newGQA(c *ModelConfig) gqa {
	return gqa{hq: c.NumAttentionHeads, hkv: c.NumKVHeads, d: c.HeadDim, gated: c.GatedAttention,
		full: c.Counts.FullAttention, sliding: c.Counts.SlidingAttention, window: c.SlidingWindow}
}

// qkvWidth is q_proj, k_proj and v_proj's outputs, (Hq + 2·Hkv)·D; gated,
// (2·Hq + 2·Hkv)·D (query and gate).
func (a gqa) qkvWidth(s *sizer) int64 {
	if a.gated {
		return s.mul(s.add(s.mul(2, a.hq), s.mul(2, a.hkv)), a.d)
	}
	return s.mul(s.add(a.hq, s.mul(2, a.hkv)), a.d)
}

// outWidth is o_proj's input, Hq·D.
func (a gqa) outWidth(s *sizer) int64 { return s.mul(a.hq, a.d) }

// decodeValueDim is D.
func (a gqa) decodeValueDim() int64 { return a.d }

// kv: every full layer caches K and V of Hkv·D per token (2·Hkv·D), paged;
// every sliding layer the same over its window.
func (a gqa) kv(s *sizer) kvShape {
	width := s.mul(2, a.hkv, a.d)
	return kvShape{
		paged:   []kvLayers{{layers: a.full, width: width, ratio: 1, kvHeads: a.hkv}},
		sliding: kvLayers{layers: a.sliding, width: width, ratio: 1, kvHeads: a.hkv},
		window:  a.window,
	}
}

// gqa adds n GQA attention blocks (modeling_llama.py LlamaAttention):
// q_proj [H, Hq·D] ([H, 2·Hq·D] with GatedAttention), k_proj and v_proj
// [H, Hkv·D], o_proj [Hq·D, H]; with AttentionBias the q/k/v biases, with
// QKNorm q_norm and k_norm [D]. Sliding layers have the same weights.
func (w *weightBuilder) gqa(p string, n int64) {
	c := w.cfg
	h, d := c.HiddenSize, c.HeadDim
	q, kv := w.mul(c.NumAttentionHeads, d), w.mul(c.NumKVHeads, d)
	qOut := q
	if c.GatedAttention {
		qOut = w.mul(2, q)
	}
	const g = "attention"
	w.t(p+"self_attn.q_proj", g, kindLinear, n, h, qOut)
	w.t(p+"self_attn.k_proj", g, kindLinear, n, h, kv)
	w.t(p+"self_attn.v_proj", g, kindLinear, n, h, kv)
	w.t(p+"self_attn.o_proj", g, kindLinear, n, q, h)
	if c.AttentionBias {
		w.t(p+"self_attn.q_proj.bias", g, kindVector, n, qOut)
		w.t(p+"self_attn.k_proj.bias", g, kindVector, n, kv)
		w.t(p+"self_attn.v_proj.bias", g, kindVector, n, kv)
	}
	if c.QKNorm {
		w.t(p+"self_attn.q_norm", g, kindVector, n, d)
		w.t(p+"self_attn.k_norm", g, kindVector, n, d)
	}
}
