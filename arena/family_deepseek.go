package arena

// deepseek: DeepSeek-V2 and V3 (modeling_deepseek_v2.py,
// modeling_deepseek_v3.py): multi-head latent attention in every layer,
// dense MLPs in the first first_k_dense_replace layers and MoE (routed
// experts plus a shared expert) in the others. V3's router adds an F32
// e_score_correction_bias (DeepseekV3TopkRouter).
type deepseek struct{ ffn ffnStyle }

func init() {
	registerFamily(deepseek{}, "deepseek_v2")
	registerFamily(deepseek{ffn: ffnStyle{scoreCorrectionBias: true}}, "deepseek_v3")
}

// parse reads the MLA ranks (D = qk_nope_head_dim + qk_rope_head_dim); layer
// i is MoE when n_routed_experts is set, i >= first_k_dense_replace and
// i % moe_layer_freq == 0.
func (deepseek) parse(r *fieldReader, c *ModelConfig) {
	c.Family = FamilyMLA
	parseCore(r, c)
	m := &MLAConfig{
		QLoRARank:     r.optional("q_lora_rank", 0),
		KVLoRARank:    r.required("kv_lora_rank"),
		QKRopeHeadDim: r.required("qk_rope_head_dim"),
		QKNopeHeadDim: r.required("qk_nope_head_dim"),
		VHeadDim:      r.required("v_head_dim"),
	}
	c.MLA = m
	if r.err == nil {
		d, err := CheckedAdd("qk head dim", m.QKNopeHeadDim, m.QKRopeHeadDim)
		if err != nil {
			r.fail("qk_nope_head_dim", m.QKNopeHeadDim, "+ qk_rope_head_dim overflows int64")
		}
		c.HeadDim = d
	}
	readExperts(r, c, false, "n_routed_experts")
	sharedExperts(r, c, 0)
	firstDense := r.nonNegative("first_k_dense_replace", 0)
	freq := r.optional("moe_layer_freq", 1)
	if r.err != nil {
		return
	}
	ffns := make([]FFNKind, c.NumLayers)
	for i := range ffns {
		ffns[i] = FFNDense
		if c.NumExperts > 0 && int64(i) >= firstDense && int64(i)%freq == 0 {
			ffns[i] = FFNMoE
		}
	}
	buildLayers(r, c, uniform(c.NumLayers, MixerFullAttention), ffns)
}

// shape is MLA and its ranks. Errors: a *ConfigError when c.MLA is nil.
func (deepseek) shape(c *ModelConfig) (modelShape, error) {
	if c.MLA == nil {
		return modelShape{}, missingSubConfig(c.ModelType, "kv_lora_rank")
	}
	a := newMLA(c, *c.MLA)
	return modelShape{attn: a, norms: a.norms()}, nil
}

// layers adds every layer's two norms, MLA and FFN.
func (f deepseek) layers(w *weightBuilder) {
	f.decoderLayers(w, "layers.", w.cfg.Counts, int64(len(w.cfg.Layers)))
}

// decoderLayers adds the norms of layers layers and the MLA and FFNs
// counted in n, named under p.
func (f deepseek) decoderLayers(w *weightBuilder, p string, n LayerCounts, layers int64) {
	w.layerNorms(p, layers)
	w.mla(p, n.Attention(), w.cfg.MLA)
	w.ffn(p, n, f.ffn)
}

// mtpLayers adds DeepSeek-V3's MTP layers (vLLM deepseek_mtp.py, as the
// checkpoint stores layer 61): eh_proj [2H, H] (an unquantized nn.Linear)
// and one decoder layer (MLA + MoE, or a dense MLP without experts) each.
// 671B + 14B = 685B.
func (f deepseek) mtpLayers(w *weightBuilder, p string, n int64) {
	h := w.cfg.HiddenSize
	w.t(p+"eh_proj", "", kindHigh, n, w.mul(2, h), h)
	counts := LayerCounts{FullAttention: n, DenseMLP: n}
	if w.cfg.NumExperts > 0 {
		counts = LayerCounts{FullAttention: n, MoE: n}
	}
	f.decoderLayers(w, p+"layers.", counts, n)
}
