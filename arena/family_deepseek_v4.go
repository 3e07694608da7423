package arena

import (
	"fmt"
	"slices"
)

// deepseekV4IndexerRatio is the compress ratio of the DeepSeek-V4 layers that
// also run the lightning indexer and cache its keys (vLLM deepseek_v4.py
// builds the indexer only on ratio-4 layers).
const deepseekV4IndexerRatio = 4

// deepseekV4: DeepSeek-V4 (vLLM deepseek_v4.py, deepseek_v4_attention.py,
// deepseek_compressor.py): every layer attends over a sliding window of one
// shared latent KV head of head_dim (K = V), compressed layers also over a
// history compressed by compress_ratios[i]; queries come from a
// q_lora_rank bottleneck, the O-projection is grouped into o_groups
// low-rank blocks, hc_mult hyper-connection streams replace the residual,
// and every layer is MoE.
type deepseekV4 struct{}

func init() { registerFamily(deepseekV4{}, "deepseek_v4") }

// parse reads the V4 fields. The config has no kv_lora_rank,
// qk_nope_head_dim or v_head_dim: the single KV head of head_dim is the
// latent (K = V), of which qk_rope_head_dim is rotary. compress_ratios[i] ≤
// 1 makes layer i sliding-window only; a larger ratio makes it compressed
// attention. Extra compress_ratios entries (MTP/draft layers) are ignored.
// Every layer is MoE when n_routed_experts is set.
func (deepseekV4) parse(r *fieldReader, c *ModelConfig) {
	c.Family = FamilyDeepSeekV4
	parseCore(r, c)
	c.HeadDim = r.required("head_dim")
	v := &DeepSeekV4Config{
		QLoRARank:     r.required("q_lora_rank"),
		QKRopeHeadDim: r.required("qk_rope_head_dim"),
		OGroups:       r.required("o_groups"),
		OLoRARank:     r.required("o_lora_rank"),
		HCMult:        r.nonNegative("hc_mult", 0),
		IndexHeadDim:  r.nonNegative("index_head_dim", 0),
		IndexNHeads:   r.nonNegative("index_n_heads", 0),
		NumHashLayers: r.nonNegative("num_hash_layers", 0),
	}
	c.DeepSeekV4 = v
	switch {
	case r.err != nil:
	case v.QKRopeHeadDim >= c.HeadDim:
		r.fail("qk_rope_head_dim", v.QKRopeHeadDim, fmt.Sprintf("must be less than head_dim (%d)", c.HeadDim))
	case c.NumAttentionHeads%v.OGroups != 0:
		r.fail("o_groups", v.OGroups, fmt.Sprintf("does not divide num_attention_heads (%d)", c.NumAttentionHeads))
	case !r.has("compress_ratios"):
		r.fail("compress_ratios", nil, "is required (missing or null)")
	case c.SlidingWindow == 0:
		r.fail("sliding_window", nil, "is required and positive: every deepseek_v4 layer has a sliding window")
	}
	ratios := r.ints("compress_ratios", entriesLimit)
	if r.err != nil {
		return
	}
	if int64(len(ratios)) < c.NumLayers {
		r.fail("compress_ratios", int64(len(ratios)),
			fmt.Sprintf("has that many entries but num_hidden_layers is %d", c.NumLayers))
		return
	}
	v.CompressRatios = ratios[:c.NumLayers]
	mixers := make([]MixerKind, c.NumLayers)
	for i, ratio := range v.CompressRatios {
		switch {
		case ratio < 0:
			r.fail(fmt.Sprintf("compress_ratios[%d]", i), ratio, "must not be negative")
			return
		case ratio <= 1:
			mixers[i] = MixerSlidingAttention
		default:
			mixers[i] = MixerCompressedAttention
		}
	}
	readExperts(r, c, false, "n_routed_experts")
	sharedExperts(r, c, 0)
	ffn := FFNDense
	if c.NumExperts > 0 {
		ffn = FFNMoE
	}
	buildLayers(r, c, mixers, uniform(c.NumLayers, ffn))
	c.Notes = append(c.Notes, fmt.Sprintf("deepseek_v4: no kv_lora_rank/qk_nope_head_dim/v_head_dim in the config; "+
		"the single KV head of head_dim %d is the latent (K = V)", c.HeadDim))
}

// shape is V4's attention, its ranks, the grouped O-projection and the
// hyper-connections. Errors: a *ConfigError when c.DeepSeekV4 is nil.
func (deepseekV4) shape(c *ModelConfig) (modelShape, error) {
	v := c.DeepSeekV4
	if v == nil {
		return modelShape{}, missingSubConfig(c.ModelType, "o_groups")
	}
	a := deepseekV4Attention{hq: c.NumAttentionHeads, hkv: c.NumKVHeads, d: c.HeadDim, layers: c.Counts.Attention(),
		window: c.SlidingWindow, indexHeadDim: v.IndexHeadDim, ratios: v.CompressRatios}
	return modelShape{attn: a, norms: []int64{v.QLoRARank, v.OLoRARank},
		oGroups: v.OGroups, oLoRARank: v.OLoRARank, hcMult: v.HCMult}, nil
}

// deepseekV4Attention is V4's attention: hq query heads and hkv (= 1)
// latent KV heads of d, a sliding window in each of layers, and a
// compressed history in each layer of ratio > 1.
type deepseekV4Attention struct {
	hq, hkv, d, layers   int64
	window, indexHeadDim int64
	ratios               []int64 // compress_ratios, one per layer
}

// qkvWidth: wq_b emits Hq·D and wkv the Hkv shared latent heads of D, so
// (Hq + Hkv)·D.
func (a deepseekV4Attention) qkvWidth(s *sizer) int64 { return s.mul(s.add(a.hq, a.hkv), a.d) }

// outWidth is the grouped O-projection's input, Hq·D.
func (a deepseekV4Attention) outWidth(s *sizer) int64 { return s.mul(a.hq, a.d) }

// decodeValueDim is D (K = V).
func (a deepseekV4Attention) decodeValueDim() int64 { return a.d }

// kv: a compressed layer of ratio r caches one latent of D per r tokens, plus
// index_head_dim indexer keys on ratio-4 layers, paged; every layer keeps a
// D latent window of sliding_window tokens. Each compressed layer keeps
// compressor state (vLLM CompressorStateCache): coff·r pending entries of
// kv + score state, 2·coff·D F32 each (coff = 2 on ratio-4 layers, which
// also run the indexer's ratio-4 compressor of index_head_dim; else 1).
func (a deepseekV4Attention) kv(s *sizer) kvShape {
	var kv kvShape
	for _, r := range a.ratios {
		if r <= 1 {
			continue
		}
		w, coff := a.d, int64(1)
		state := int64(0)
		if r == deepseekV4IndexerRatio {
			w, coff = s.add(w, a.indexHeadDim), 2
			state = s.mul(coff, r, 2, coff, a.indexHeadDim, F32.Size()) // the indexer's compressor
		}
		state = s.add(state, s.mul(coff, r, 2, coff, a.d, F32.Size()))
		kv.paged = append(kv.paged, kvLayers{layers: 1, width: w, ratio: r, state: state})
		kv.compressorState = s.add(kv.compressorState, state)
	}
	kv.sliding, kv.window = kvLayers{layers: a.layers, width: a.d, ratio: 1}, a.window
	return kv
}

// layers adds the decoder layers and the hyper-connection head.
func (deepseekV4) layers(w *weightBuilder) {
	v, layers := w.cfg.DeepSeekV4, int64(len(w.cfg.Layers))
	ratios := map[int64]int64{}
	for _, r := range v.CompressRatios {
		ratios[r]++
	}
	w.deepseekV4Layers("layers.", layers, ratios, min(v.NumHashLayers, layers))
	w.hcHead("", 1)
}

// mtpLayers adds V4's MTP layers (vLLM deepseek_v4_mtp.py): e_proj and
// h_proj [H, H] (fp8), one decoder layer with compress ratio 1 (sliding
// window only: no compressor or indexer) and score-routed MoE, and its own
// hc_head.
func (deepseekV4) mtpLayers(w *weightBuilder, p string, n int64) {
	h := w.cfg.HiddenSize
	w.t(p+"e_proj", "", kindLinear, n, h, h)
	w.t(p+"h_proj", "", kindLinear, n, h, h)
	w.deepseekV4Layers(p+"layers.", n, map[int64]int64{1: n}, 0)
	w.hcHead(p, n)
}

// deepseekV4Layers adds n DeepSeek-V4 decoder layers (vLLM deepseek_v4.py
// DeepseekV4DecoderLayer, deepseek_v4_attention.py, deepseek_compressor.py);
// ratios counts the layers per compress ratio, the first hash of them route
// by token-id hash. Per layer:
//   - attn_norm, ffn_norm [H];
//   - attention: wq_a [H, q_lora_rank], q_norm [q_lora_rank], wq_b
//     [q_lora_rank, Hq·D], wkv [H, D] (the single latent KV head of head_dim
//     D), kv_norm [D], the grouped O-projection wo_a [Hq·D/o_groups,
//     o_groups·o_lora_rank] (o_groups blocks of Hq·D/o_groups → o_lora_rank:
//     Hq·D·o_lora_rank params) and wo_b [o_groups·o_lora_rank, H], attn_sink
//     [Hq] F32;
//   - ratio r > 1 adds a compressor (coff = 2 when r = 4, else 1):
//     fused wkv+wgate [H, 2·coff·D] (unquantized), ape [r, coff·D] F32,
//     norm [D]; ratio 4 also the lightning indexer: wq_b [q_lora_rank,
//     index_n_heads·index_head_dim], weights_proj [H, index_n_heads]
//     (unquantized), k_norm LayerNorm weight and bias [index_head_dim], and
//     its own ratio-4 compressor of head dim index_head_dim;
//   - hyper-connections (hc = hc_mult, mix = (2 + hc)·hc): hc_attn_fn and
//     hc_ffn_fn [mix, hc·H], hc_*_base [mix], hc_*_scale [3], all F32;
//   - MoE: gate [H, E]; tid2eid [V, K] I32 on hash layers, else an F32
//     e_score_correction_bias [E]; E routed experts w1/w3 [H, Im], w2 [Im, H];
//     the shared expert of n_shared_experts·Im.
func (w *weightBuilder) deepseekV4Layers(p string, n int64, ratios map[int64]int64, hash int64) {
	c, v := w.cfg, w.cfg.DeepSeekV4
	h, hq, d := c.HiddenSize, c.NumAttentionHeads, c.HeadDim
	w.t(p+"attn_norm", "norms", kindVector, n, h)
	w.t(p+"ffn_norm", "norms", kindVector, n, h)
	const a = "attention"
	w.t(p+"attn.wq_a", a, kindLinear, n, h, v.QLoRARank)
	w.t(p+"attn.q_norm", a, kindVector, n, v.QLoRARank)
	w.t(p+"attn.wq_b", a, kindLinear, n, v.QLoRARank, w.mul(hq, d))
	w.t(p+"attn.wkv", a, kindLinear, n, h, d)
	w.t(p+"attn.kv_norm", a, kindVector, n, d)
	if v.OGroups > 0 {
		w.t(p+"attn.wo_a", a, kindLinear, n, w.mul(hq, d)/v.OGroups, w.mul(v.OGroups, v.OLoRARank))
		w.t(p+"attn.wo_b", a, kindLinear, n, w.mul(v.OGroups, v.OLoRARank), h)
	}
	w.t(p+"attn.attn_sink", a, kindF32, n, hq)
	keys := make([]int64, 0, len(ratios))
	for r := range ratios {
		keys = append(keys, r)
	}
	slices.Sort(keys)
	for _, r := range keys {
		m := ratios[r]
		if r <= 1 {
			continue
		}
		cp := fmt.Sprintf("%sattn.compressor[ratio %d].", p, r)
		w.compressor(cp, m, r, d)
		if r != deepseekV4IndexerRatio {
			continue
		}
		if v.IndexNHeads == 0 || v.IndexHeadDim == 0 {
			w.notes = append(w.notes, "deepseek_v4: index_n_heads or index_head_dim is absent: no lightning indexer weights")
			continue
		}
		ip := p + "attn.indexer."
		w.t(ip+"wq_b", a, kindLinear, m, v.QLoRARank, w.mul(v.IndexNHeads, v.IndexHeadDim))
		w.t(ip+"weights_proj", a, kindHigh, m, h, v.IndexNHeads)
		w.t(ip+"k_norm.weight", a, kindVector, m, v.IndexHeadDim)
		w.t(ip+"k_norm.bias", a, kindVector, m, v.IndexHeadDim)
		w.compressor(ip+"compressor.", m, r, v.IndexHeadDim)
	}
	if hc := v.HCMult; hc > 0 {
		mix, dim := w.mul(w.add(2, hc), hc), w.mul(hc, h)
		const g = "hyper_connections"
		for _, s := range []string{"attn", "ffn"} {
			w.t(p+"hc_"+s+"_fn", g, kindF32, n, mix, dim)
			w.t(p+"hc_"+s+"_base", g, kindF32, n, mix)
			w.t(p+"hc_"+s+"_scale", g, kindF32, n, 3)
		}
	}
	if c.NumExperts == 0 {
		w.notes = append(w.notes, "deepseek_v4 without n_routed_experts: no FFN weights counted")
		return
	}
	e, k := c.NumExperts, c.NumExpertsPerTok
	w.t(p+"ffn.gate", "moe_router", kindHigh, n, h, e)
	w.t(p+"ffn.gate.tid2eid", "moe_router", kindI32, hash, c.VocabSize, k)
	w.t(p+"ffn.gate.e_score_correction_bias", "moe_router", kindF32, n-hash, e)
	w.mlp(p+"ffn.experts.", "moe_experts", kindExpert, w.mul(n, e), w.mul(n, k), c.MoEIntermediateSize, false, expertLayout{})
	if s := c.SharedExpertIntermediateSize; s > 0 {
		w.mlp(p+"ffn.shared_experts.", "moe_shared_experts", kindLinear, n, n, s, false, expertLayout{})
	}
}

// compressor adds n DeepseekCompressor modules of ratio r and head dim d.
func (w *weightBuilder) compressor(p string, n, r, d int64) {
	coff := int64(1)
	if r == deepseekV4IndexerRatio {
		coff = 2 // overlapping windows (vLLM: overlap = compress_ratio == 4)
	}
	const a = "attention"
	w.t(p+"wkv_wgate", a, kindHigh, n, w.cfg.HiddenSize, w.mul(2, coff, d))
	w.t(p+"ape", a, kindF32, n, r, w.mul(coff, d))
	w.t(p+"norm", a, kindVector, n, d)
}

// hcHead adds DeepSeek-V4's hyper-connection head: hc_head_fn [hc, hc·H],
// hc_head_base [hc], hc_head_scale [1], F32, n times (once per model, once
// per MTP layer).
func (w *weightBuilder) hcHead(p string, n int64) {
	hc := w.cfg.DeepSeekV4.HCMult
	if hc == 0 {
		return
	}
	const g = "hyper_connections"
	w.t(p+"hc_head_fn", g, kindF32, n, hc, w.mul(hc, w.cfg.HiddenSize))
	w.t(p+"hc_head_base", g, kindF32, n, hc)
	w.t(p+"hc_head_scale", g, kindF32, n, 1)
}
