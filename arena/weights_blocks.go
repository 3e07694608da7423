package arena

import "fmt"

// The tensors the families are built from, from the Hugging Face modeling
// files and vLLM's model files named on each function; each family's layers
// method (family_<name>.go) composes them. Shapes are [in, out] for
// projections. Conventions every family shares:
//   - embed_tokens [V, H]; lm_head [H, V] unless tie_word_embeddings (absent
//     → untied, as LlamaConfig, Qwen*Config, MixtralConfig, GptOssConfig,
//     NemotronHConfig and DeepseekV3Config default it); final norm [H].
//   - no projection has a bias unless ModelConfig.AttentionBias says so or
//     the family adds one (gpt_oss: o_proj, router and experts).
//   - norms are RMSNorm weights [dim] (DeepSeek-V4 indexer k_norm is a
//     LayerNorm: weight and bias).

// t adds count instances of a tensor, all of them read by every token.
func (w *weightBuilder) t(name, group string, kind tensorKind, count int64, shape ...int64) {
	w.tensor(name, group, kind, count, count, shape...)
}

// model adds the served model's tensors (no MTP layers): embed_tokens, the
// family's decoder layers, the final norm and lm_head, then a multimodal
// family's vision tower and projector.
func (w *weightBuilder) model(spec familySpec) {
	c := w.cfg
	w.t("embed_tokens", "embedding", kindEmbedding, 1, c.VocabSize, c.HiddenSize)
	spec.layers(w)
	w.t("norm", "norms", kindVector, 1, c.HiddenSize)
	if c.TieWordEmbeddings {
		w.notes = append(w.notes, "tie_word_embeddings: lm_head shares embed_tokens and is counted once")
	} else {
		w.t("lm_head", "lm_head", kindHigh, 1, c.HiddenSize, c.VocabSize)
	}
	if v, ok := spec.(visionFamily); ok {
		v.vision(w)
	}
}

// mtp adds the num_nextn_predict_layers MTP layers and returns how many
// were modelled (0 when the family is not an mtpFamily, with a note). Every
// modelled MTP layer has, as the checkpoints store them, its own
// embed_tokens [V, H], enorm and hnorm [H], the family's mtpLayers, and
// shared_head.norm [H] and shared_head.head [H, V]; all in group "mtp".
func (w *weightBuilder) mtp(spec familySpec) int64 {
	c := w.cfg
	n := c.NumNextNPredictLayers
	if n == 0 {
		return 0
	}
	m, ok := spec.(mtpFamily)
	if !ok {
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
	m.mtpLayers(w, p, n)
	w.t(p+"shared_head.norm", "", kindVector, n, h)
	w.t(p+"shared_head.head", "", kindHigh, n, h, c.VocabSize)
	return n
}

// layerNorms adds the two RMSNorms [H] of each of n standard decoder
// layers: input_layernorm and post_attention_layernorm.
func (w *weightBuilder) layerNorms(p string, n int64) {
	w.t(p+"input_layernorm", "norms", kindVector, n, w.cfg.HiddenSize)
	w.t(p+"post_attention_layernorm", "norms", kindVector, n, w.cfg.HiddenSize)
}

// ffnStyle is how a family builds its feed-forward blocks beyond the
// standard SwiGLU MLP and a router [H, E] with experts of gate, up and down
// (LlamaMLP, MixtralSparseMoeBlock).
type ffnStyle struct {
	// relu2: MLPs and experts are non-gated relu² (NemotronHMLP: up_proj
	// and down_proj, no gate_proj).
	relu2 bool
	// routerBias: the router has a bias [E] (gpt_oss GptOssTopKRouter).
	routerBias bool
	// scoreCorrectionBias: the router keeps an F32 e_score_correction_bias
	// [E] (DeepseekV3TopkRouter and the routers built like it).
	scoreCorrectionBias bool
	// fusedExperts: experts are gate_up_proj [H, 2·Im] with bias [2·Im] and
	// down_proj [Im, H] with bias [H] (modeling_gpt_oss.py GptOssExperts).
	fusedExperts bool
	// sharedExpertGate: the shared expert's output is gated by
	// shared_expert_gate [H, 1] (Qwen2MoeSparseMoeBlock).
	sharedExpertGate bool
}

// ffn adds the dense MLPs and MoE blocks counted in n, in style.
func (w *weightBuilder) ffn(p string, n LayerCounts, style ffnStyle) {
	w.mlp(p+"mlp.", "mlp", kindLinear, n.DenseMLP, n.DenseMLP, w.cfg.IntermediateSize, style.relu2, expertLayout{})
	w.moe(p, n.MoE, style)
}

// mlp adds count MLPs of width i (active of them read per token): up_proj
// [H, i] and down_proj [i, H], plus gate_proj [H, i] unless relu2. A padded
// l (routed MXFP4 experts, mxfp4Layout) sizes them as the engine holds
// them: [Hp, Ip] and [Ip, Hp].
func (w *weightBuilder) mlp(p, group string, kind tensorKind, count, active, i int64, relu2 bool, l expertLayout) {
	h := w.cfg.HiddenSize
	in, out := tensorForm{}, tensorForm{}
	if l.padded() {
		in.engineShape, out.engineShape = []int64{l.h, l.im}, []int64{l.im, l.h}
	}
	if !relu2 {
		w.tensorAs(p+"gate_proj", group, kind, count, active, []int64{h, i}, in)
	}
	w.tensorAs(p+"up_proj", group, kind, count, active, []int64{h, i}, in)
	w.tensorAs(p+"down_proj", group, kind, count, active, []int64{i, h}, out)
}

// routedExperts adds the routed experts of n MoE layers (e of them per
// layer, k read per token) of width im, in style; MXFP4 experts as the
// engine holds them (mxfp4Layout). Fused experts (GptOssExperts) are
// gate_up_proj [H, 2·Im] with bias [2·Im] and down_proj [Im, H] with bias
// [H]; padded, [Hp, 2·Ip], [2·Ip], [Ip, Hp] and [Hp] (vLLM w13_weight,
// w13_bias, w2_weight, w2_bias).
func (w *weightBuilder) routedExperts(p string, n, e, k, im int64, style ffnStyle) {
	all, active := w.mul(n, e), w.mul(n, k)
	l := w.mxfp4Layout()
	if l.padded() {
		w.expertPad = l
	}
	if !style.fusedExperts {
		w.mlp(p+"mlp.experts.", "moe_experts", kindExpert, all, active, im, style.relu2, l)
		return
	}
	const g = "moe_experts"
	h := w.cfg.HiddenSize
	var up, upBias, down, downBias tensorForm
	if l.padded() {
		up.engineShape, upBias.engineShape = []int64{l.h, w.mul(2, l.im)}, []int64{w.mul(2, l.im)}
		down.engineShape, downBias.engineShape = []int64{l.im, l.h}, []int64{l.h}
		upBias.engineFormat, downBias.engineFormat = l.biasFormat, l.biasFormat
	}
	w.tensorAs(p+"mlp.experts.gate_up_proj", g, kindExpert, all, active, []int64{h, w.mul(2, im)}, up)
	w.tensorAs(p+"mlp.experts.gate_up_proj_bias", g, kindVector, all, active, []int64{w.mul(2, im)}, upBias)
	w.tensorAs(p+"mlp.experts.down_proj", g, kindExpert, all, active, []int64{im, h}, down)
	w.tensorAs(p+"mlp.experts.down_proj_bias", g, kindVector, all, active, []int64{h}, downBias)
}

// moe adds n MoE blocks in style: router mlp.gate [H, E] (and its bias or
// score correction bias), E routed experts of width Im of which K are read
// per token, and the shared expert MLP of SharedExpertIntermediateSize
// (and its gate).
func (w *weightBuilder) moe(p string, n int64, style ffnStyle) {
	c := w.cfg
	e, k, h := c.NumExperts, c.NumExpertsPerTok, c.HiddenSize
	if n == 0 || e == 0 {
		return
	}
	w.t(p+"mlp.gate", "moe_router", kindHigh, n, h, e)
	if style.routerBias {
		w.t(p+"mlp.router.bias", "moe_router", kindVector, n, e)
	}
	if style.scoreCorrectionBias {
		w.t(p+"mlp.gate.e_score_correction_bias", "moe_router", kindF32, n, e)
	}
	w.routedExperts(p, n, e, k, c.MoEIntermediateSize, style)
	if s := c.SharedExpertIntermediateSize; s > 0 {
		w.mlp(p+"mlp.shared_experts.", "moe_shared_experts", kindLinear, n, n, s, style.relu2, expertLayout{})
		if style.sharedExpertGate {
			w.t(p+"mlp.shared_expert_gate", "moe_shared_experts", kindHigh, n, h, 1)
		}
	}
}

// gdn adds n Gated DeltaNet mixers of dims g (modeling_qwen3_next.py
// Qwen3NextGatedDeltaNet), with key_dim = nk·dk and value_dim = nv·dv:
// in_proj_qkvz [H, 2·key_dim + 2·value_dim], in_proj_ba [H, 2·nv], conv1d
// [conv_dim, kernel] without bias (conv_dim = 2·key_dim + value_dim),
// dt_bias and A_log [nv], the gated RMSNorm [dv], out_proj [value_dim, H].
func (w *weightBuilder) gdn(p string, n int64, g *GDNConfig) {
	h := w.cfg.HiddenSize
	const grp = "linear_attention"
	w.t(p+"linear_attn.in_proj_qkvz", grp, kindLinear, n, h, g.qkvzWidth(&w.sizer))
	w.t(p+"linear_attn.in_proj_ba", grp, kindLinear, n, h, w.mul(2, g.NumValueHeads))
	w.t(p+"linear_attn.conv1d", grp, kindVector, n, g.convDim(&w.sizer), g.ConvKernel)
	w.t(p+"linear_attn.dt_bias", grp, kindVector, n, g.NumValueHeads)
	w.t(p+"linear_attn.A_log", grp, kindVector, n, g.NumValueHeads)
	w.t(p+"linear_attn.norm", grp, kindVector, n, g.ValueHeadDim)
	w.t(p+"linear_attn.out_proj", grp, kindLinear, n, w.mul(g.NumValueHeads, g.ValueHeadDim), h)
}

// mamba adds n Mamba-2 mixers of dims m (modeling_nemotron_h.py
// NemotronHMamba2Mixer, use_bias false, use_conv_bias true): in_proj [H,
// 2·d_inner + 2·n_groups·d_state + nheads], conv1d weight [conv_dim,
// kernel] and bias [conv_dim] (conv_dim = d_inner + 2·n_groups·d_state),
// dt_bias, A_log and D [nheads], the gated RMSNorm [d_inner], out_proj
// [d_inner, H].
func (w *weightBuilder) mamba(p string, n int64, m *MambaConfig) {
	h := w.cfg.HiddenSize
	convDim := m.convDim(&w.sizer)
	const g = "mamba2"
	w.t(p+"mixer.in_proj", g, kindLinear, n, h, w.add(m.DInner, convDim, m.NumHeads)) // 2·d_inner + 2·n_groups·d_state + nheads
	w.t(p+"mixer.conv1d", g, kindVector, n, convDim, m.ConvKernel)
	w.t(p+"mixer.conv1d.bias", g, kindVector, n, convDim)
	w.t(p+"mixer.dt_bias", g, kindVector, n, m.NumHeads)
	w.t(p+"mixer.A_log", g, kindVector, n, m.NumHeads)
	w.t(p+"mixer.D", g, kindVector, n, m.NumHeads)
	w.t(p+"mixer.norm", g, kindVector, n, m.DInner)
	w.t(p+"mixer.out_proj", g, kindLinear, n, m.DInner, h)
}
