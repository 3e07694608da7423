package arena

import (
	"fmt"
	"slices"
)

// The tensors of each family, from the Hugging Face modeling files and vLLM's
// model files named on each function. Shapes are [in, out] for projections.
// Conventions every family shares:
//   - embed_tokens [V, H]; lm_head [H, V] unless tie_word_embeddings (absent
//     → untied, as LlamaConfig, Qwen*Config, MixtralConfig, GptOssConfig,
//     NemotronHConfig and DeepseekV3Config default it); final norm [H].
//   - no projection has a bias unless the family is listed as having one
//     (qwen2/qwen2_moe q/k/v; gpt_oss q/k/v/o, router and experts).
//   - norms are RMSNorm weights [dim] (DeepSeek-V4 indexer k_norm is a
//     LayerNorm: weight and bias).

// mul is the overflow-checked product of xs; 0 after the first overflow.
func (w *weightBuilder) mul(xs ...int64) int64 {
	if w.err != nil {
		return 0
	}
	v, err := CheckedProduct("weight shape", xs...)
	w.err = err
	return v
}

// sum is the overflow-checked sum of xs; 0 after the first overflow.
func (w *weightBuilder) sum(xs ...int64) int64 {
	if w.err != nil {
		return 0
	}
	v, err := CheckedSum("weight shape", xs...)
	w.err = err
	return v
}

// t adds count instances of a tensor, all of them read by every token.
func (w *weightBuilder) t(name, group string, kind tensorKind, count int64, shape ...int64) {
	w.add(name, group, kind, count, count, shape...)
}

// model adds the served model's tensors (no MTP layers).
func (w *weightBuilder) model() {
	c := w.cfg
	h, layers := c.HiddenSize, int64(len(c.Layers))
	w.t("embed_tokens", "embedding", kindEmbedding, 1, c.VocabSize, h)
	if c.DeepSeekV4 != nil {
		ratios := map[int64]int64{}
		for _, r := range c.DeepSeekV4.CompressRatios {
			ratios[r]++
		}
		w.deepseekV4Layers("layers.", layers, ratios, min(c.DeepSeekV4.NumHashLayers, layers))
		w.hcHead("", 1)
	} else {
		w.decoderLayers("layers.", c.Counts, layers)
	}
	w.t("norm", "norms", kindVector, 1, h)
	if c.TieWordEmbeddings {
		w.notes = append(w.notes, "tie_word_embeddings: lm_head shares embed_tokens and is counted once")
	} else {
		w.t("lm_head", "lm_head", kindHigh, 1, h, c.VocabSize)
	}
}

// decoderLayers adds the layers of every family but DeepSeek-V4: per-layer
// norms, then each mixer kind and each FFN kind, n of each as counted.
func (w *weightBuilder) decoderLayers(p string, n LayerCounts, layers int64) {
	c := w.cfg
	h := c.HiddenSize
	if c.Family == FamilyMamba2Hybrid {
		// NemotronHBlock: one pre-norm per block, whatever its mixer.
		w.t(p+"norm", "norms", kindVector, layers, h)
	} else {
		w.t(p+"input_layernorm", "norms", kindVector, layers, h)
		w.t(p+"post_attention_layernorm", "norms", kindVector, layers, h)
	}
	if c.MLA != nil {
		w.mla(p, n.Attention())
	} else {
		w.attention(p, n.Attention())
	}
	if c.GDN != nil {
		w.gdn(p, n.GDN)
	}
	if c.Mamba != nil {
		w.mamba(p, n.Mamba2)
	}
	w.denseMLP(p, n.DenseMLP)
	w.moe(p, n.MoE)
}

// attention: standard GQA (modeling_llama.py LlamaAttention): q_proj
// [H, Hq·D], k_proj and v_proj [H, Hkv·D], o_proj [Hq·D, H]. Gated attention
// (modeling_qwen3_next.py Qwen3NextAttention) projects query and gate:
// q_proj [H, 2·Hq·D]. Qwen3 families add q_norm and k_norm [D]; qwen2 has
// q/k/v biases; gpt_oss (modeling_gpt_oss.py) has q/k/v/o biases and one
// attention sink per head [Hq]. Sliding layers have the same weights.
func (w *weightBuilder) attention(p string, n int64) {
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
	switch c.ModelType {
	case "qwen2", "qwen2_moe":
		w.t(p+"self_attn.q_proj.bias", g, kindVector, n, qOut)
		w.t(p+"self_attn.k_proj.bias", g, kindVector, n, kv)
		w.t(p+"self_attn.v_proj.bias", g, kindVector, n, kv)
	case "gpt_oss":
		w.t(p+"self_attn.q_proj.bias", g, kindVector, n, qOut)
		w.t(p+"self_attn.k_proj.bias", g, kindVector, n, kv)
		w.t(p+"self_attn.v_proj.bias", g, kindVector, n, kv)
		w.t(p+"self_attn.o_proj.bias", g, kindVector, n, h)
		w.t(p+"self_attn.sinks", g, kindVector, n, c.NumAttentionHeads)
	case "qwen3", "qwen3_moe", "qwen3_next":
		w.t(p+"self_attn.q_norm", g, kindVector, n, d)
		w.t(p+"self_attn.k_norm", g, kindVector, n, d)
	}
}

// mla: DeepSeek-V2/V3 multi-head latent attention (modeling_deepseek_v3.py
// DeepseekV3Attention): q_a_proj [H, q_lora_rank], q_a_layernorm, q_b_proj
// [q_lora_rank, Hq·(nope+rope)] (q_proj [H, Hq·(nope+rope)] when q_lora_rank
// is null), kv_a_proj_with_mqa [H, kv_lora_rank + rope], kv_a_layernorm
// [kv_lora_rank], kv_b_proj [kv_lora_rank, Hq·(nope + v)], o_proj [Hq·v, H].
func (w *weightBuilder) mla(p string, n int64) {
	c, m := w.cfg, w.cfg.MLA
	h, hq := c.HiddenSize, c.NumAttentionHeads
	const g = "attention"
	qOut := w.mul(hq, w.sum(m.QKNopeHeadDim, m.QKRopeHeadDim))
	if m.QLoRARank > 0 {
		w.t(p+"self_attn.q_a_proj", g, kindLinear, n, h, m.QLoRARank)
		w.t(p+"self_attn.q_a_layernorm", g, kindVector, n, m.QLoRARank)
		w.t(p+"self_attn.q_b_proj", g, kindLinear, n, m.QLoRARank, qOut)
	} else {
		w.t(p+"self_attn.q_proj", g, kindLinear, n, h, qOut)
	}
	w.t(p+"self_attn.kv_a_proj_with_mqa", g, kindLinear, n, h, w.sum(m.KVLoRARank, m.QKRopeHeadDim))
	w.t(p+"self_attn.kv_a_layernorm", g, kindVector, n, m.KVLoRARank)
	w.t(p+"self_attn.kv_b_proj", g, kindLinear, n, m.KVLoRARank, w.mul(hq, w.sum(m.QKNopeHeadDim, m.VHeadDim)))
	w.t(p+"self_attn.o_proj", g, kindLinear, n, w.mul(hq, m.VHeadDim), h)
}

// gdn: Gated DeltaNet (modeling_qwen3_next.py Qwen3NextGatedDeltaNet), with
// key_dim = nk·dk and value_dim = nv·dv: in_proj_qkvz [H, 2·key_dim +
// 2·value_dim], in_proj_ba [H, 2·nv], conv1d [conv_dim, kernel] without bias
// (conv_dim = 2·key_dim + value_dim), dt_bias and A_log [nv], the gated
// RMSNorm [dv], out_proj [value_dim, H].
func (w *weightBuilder) gdn(p string, n int64) {
	c, g := w.cfg, w.cfg.GDN
	h := c.HiddenSize
	keyDim, valueDim := w.mul(g.NumKeyHeads, g.KeyHeadDim), w.mul(g.NumValueHeads, g.ValueHeadDim)
	const grp = "linear_attention"
	w.t(p+"linear_attn.in_proj_qkvz", grp, kindLinear, n, h, w.sum(w.mul(2, keyDim), w.mul(2, valueDim)))
	w.t(p+"linear_attn.in_proj_ba", grp, kindLinear, n, h, w.mul(2, g.NumValueHeads))
	w.t(p+"linear_attn.conv1d", grp, kindVector, n, w.sum(w.mul(2, keyDim), valueDim), g.ConvKernel)
	w.t(p+"linear_attn.dt_bias", grp, kindVector, n, g.NumValueHeads)
	w.t(p+"linear_attn.A_log", grp, kindVector, n, g.NumValueHeads)
	w.t(p+"linear_attn.norm", grp, kindVector, n, g.ValueHeadDim)
	w.t(p+"linear_attn.out_proj", grp, kindLinear, n, valueDim, h)
}

// mamba: Mamba-2 mixer (modeling_nemotron_h.py NemotronHMamba2Mixer,
// use_bias false, use_conv_bias true): in_proj [H, 2·d_inner +
// 2·n_groups·d_state + nheads], conv1d weight [conv_dim, kernel] and bias
// [conv_dim] (conv_dim = d_inner + 2·n_groups·d_state), dt_bias, A_log and D
// [nheads], the gated RMSNorm [d_inner], out_proj [d_inner, H].
func (w *weightBuilder) mamba(p string, n int64) {
	c, m := w.cfg, w.cfg.Mamba
	h := c.HiddenSize
	bc := w.mul(2, m.NumGroups, m.StateSize)
	convDim := w.sum(m.DInner, bc)
	const g = "mamba2"
	w.t(p+"mixer.in_proj", g, kindLinear, n, h, w.sum(w.mul(2, m.DInner), bc, m.NumHeads))
	w.t(p+"mixer.conv1d", g, kindVector, n, convDim, m.ConvKernel)
	w.t(p+"mixer.conv1d.bias", g, kindVector, n, convDim)
	w.t(p+"mixer.dt_bias", g, kindVector, n, m.NumHeads)
	w.t(p+"mixer.A_log", g, kindVector, n, m.NumHeads)
	w.t(p+"mixer.D", g, kindVector, n, m.NumHeads)
	w.t(p+"mixer.norm", g, kindVector, n, m.DInner)
	w.t(p+"mixer.out_proj", g, kindLinear, n, m.DInner, h)
}

// relu2 reports whether the family's MLPs are non-gated relu² (NemotronHMLP:
// up_proj and down_proj only) rather than SwiGLU (gate, up, down).
func (w *weightBuilder) relu2() bool { return w.cfg.Family == FamilyMamba2Hybrid }

// mlp adds one MLP of width i per instance: up/down for relu², else
// gate/up/down (LlamaMLP).
func (w *weightBuilder) mlp(p, group string, kind tensorKind, count, active, i int64) {
	h := w.cfg.HiddenSize
	if !w.relu2() {
		w.add(p+"gate_proj", group, kind, count, active, h, i)
	}
	w.add(p+"up_proj", group, kind, count, active, h, i)
	w.add(p+"down_proj", group, kind, count, active, i, h)
}

// denseMLP: n dense MLPs of intermediate_size: 3·H·I (SwiGLU) or 2·H·I (relu²).
func (w *weightBuilder) denseMLP(p string, n int64) {
	w.mlp(p+"mlp.", "mlp", kindLinear, n, n, w.cfg.IntermediateSize)
}

// moe: n MoE blocks. Router [H, E] (gpt_oss adds a bias [E]; deepseek_v3
// and nemotron_h an F32 e_score_correction_bias [E]); E routed experts of
// width Im, K of them read per token (gpt_oss, modeling_gpt_oss.py
// GptOssExperts: gate_up_proj [H, 2·Im] with bias [2·Im], down_proj [Im, H]
// with bias [H]); the shared expert MLP of SharedExpertIntermediateSize
// (qwen2_moe and qwen3_next add shared_expert_gate [H, 1]).
func (w *weightBuilder) moe(p string, n int64) {
	c := w.cfg
	e, k, h := c.NumExperts, c.NumExpertsPerTok, c.HiddenSize
	if n == 0 || e == 0 {
		return
	}
	w.t(p+"mlp.gate", "moe_router", kindHigh, n, h, e)
	switch c.ModelType {
	case "gpt_oss":
		w.t(p+"mlp.router.bias", "moe_router", kindVector, n, e)
	case "deepseek_v3", "nemotron_h":
		w.t(p+"mlp.gate.e_score_correction_bias", "moe_router", kindF32, n, e)
	}
	all, active := w.mul(n, e), w.mul(n, k)
	im := c.MoEIntermediateSize
	if c.ModelType == "gpt_oss" {
		const g = "moe_experts"
		w.add(p+"mlp.experts.gate_up_proj", g, kindExpert, all, active, h, w.mul(2, im))
		w.add(p+"mlp.experts.gate_up_proj_bias", g, kindVector, all, active, w.mul(2, im))
		w.add(p+"mlp.experts.down_proj", g, kindExpert, all, active, im, h)
		w.add(p+"mlp.experts.down_proj_bias", g, kindVector, all, active, h)
	} else {
		w.mlp(p+"mlp.experts.", "moe_experts", kindExpert, all, active, im)
	}
	if s := c.SharedExpertIntermediateSize; s > 0 {
		w.mlp(p+"mlp.shared_experts.", "moe_shared_experts", kindLinear, n, n, s)
		if c.ModelType == "qwen2_moe" || c.ModelType == "qwen3_next" {
			w.t(p+"mlp.shared_expert_gate", "moe_shared_experts", kindHigh, n, h, 1)
		}
	}
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
		mix, dim := w.mul(w.sum(2, hc), hc), w.mul(hc, h)
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
	w.mlp(p+"ffn.experts.", "moe_experts", kindExpert, w.mul(n, e), w.mul(n, k), c.MoEIntermediateSize)
	if s := c.SharedExpertIntermediateSize; s > 0 {
		w.mlp(p+"ffn.shared_experts.", "moe_shared_experts", kindLinear, n, n, s)
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

// mtp adds the num_nextn_predict_layers MTP layers and returns how many
// were modelled (0 when the family's MTP is not):
//   - DeepSeek-V3 (vLLM deepseek_mtp.py, as the checkpoint stores layer 61):
//     its own embed_tokens [V, H], enorm and hnorm [H], eh_proj [2H, H]
//     (an unquantized nn.Linear), one decoder layer (MLA + MoE),
//     shared_head.norm [H] and shared_head.head [H, V]. 671B + 14B = 685B.
//   - DeepSeek-V4 (vLLM deepseek_v4_mtp.py): embed_tokens [V, H], enorm and
//     hnorm [H], e_proj and h_proj [H, H] (fp8), its own hc_head, shared_head
//     norm and head [H, V], and one decoder layer with compress ratio 1
//     (sliding window only: no compressor or indexer) and score-routed MoE.
func (w *weightBuilder) mtp() int64 {
	c := w.cfg
	n := c.NumNextNPredictLayers
	if n == 0 {
		return 0
	}
	if c.Family != FamilyMLA && c.Family != FamilyDeepSeekV4 {
		w.notes = append(w.notes, fmt.Sprintf("num_nextn_predict_layers %d: MTP layers of model_type %q are not modelled", n, clip(c.ModelType)))
		return 0
	}
	h := c.HiddenSize
	w.group = "mtp"
	defer func() { w.group = "" }()
	const p = "mtp."
	w.t(p+"embed_tokens", "", kindEmbedding, n, c.VocabSize, h)
	w.t(p+"enorm", "", kindVector, n, h)
	w.t(p+"hnorm", "", kindVector, n, h)
	if c.DeepSeekV4 != nil {
		w.t(p+"e_proj", "", kindLinear, n, h, h)
		w.t(p+"h_proj", "", kindLinear, n, h, h)
		w.deepseekV4Layers(p+"layers.", n, map[int64]int64{1: n}, 0)
		w.hcHead(p, n)
	} else {
		w.t(p+"eh_proj", "", kindHigh, n, w.mul(2, h), h)
		counts := LayerCounts{FullAttention: n, DenseMLP: n}
		if c.NumExperts > 0 {
			counts = LayerCounts{FullAttention: n, MoE: n}
		}
		w.decoderLayers(p+"layers.", counts, n)
	}
	w.t(p+"shared_head.norm", "", kindVector, n, h)
	w.t(p+"shared_head.head", "", kindHigh, n, h, c.VocabSize)
	return n
}
