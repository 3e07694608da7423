package arena

// gemma3Text: Gemma-3's language model (modeling_gemma3.py
// Gemma3TextModel, model_type gemma3_text): GQA attention with q_norm and
// k_norm [D] (Gemma3Attention; its query_pre_attn_scalar and the
// embedding's √H scale change no size), a dense gated MLP of
// intermediate_size, four RMSNorms [H] per layer (input_layernorm,
// post_attention_layernorm, pre_feedforward_layernorm,
// post_feedforward_layernorm), sliding-window attention on every layer
// but one in sliding_window_pattern, and the LM head tied to embed_tokens
// (tie_word_embeddings defaults to true).
type gemma3Text struct{ decoder }

// gemma3: Gemma-3's vision-language model (Gemma3ForConditionalGeneration,
// model_type gemma3): gemma3_text under text_config, a SigLIP vision
// tower, and Gemma3MultiModalProjector (mm_input_projection_weight [Hv,
// H], applied as x·W, and mm_soft_emb_norm, an RMSNorm [Hv]). Its
// checkpoint (google/gemma-3-27b-it) names the language model
// language_model.model.* and the tied head language_model.lm_head.
var gemma3 = multimodal{text: "gemma3_text", visionType: "siglip_vision_model",
	projector: gemma3Projector, root: "language_model.model", lmHead: "language_model.lm_head"}

func init() {
	registerFamily(gemma3Text{}, "gemma3_text")
	registerFamily(gemma3, "gemma3")
}

// gemma3TextDefaults are Gemma3TextConfig's defaults
// (configuration_gemma3.py) for the fields a Gemma-3 config may leave out:
// google/gemma-3-27b-it's text_config states neither vocab_size nor
// max_position_embeddings nor the window pattern.
var gemma3TextDefaults = classDefaults{class: "Gemma3TextConfig", file: "configuration_gemma3.py", fields: []fieldDefault{
	{"vocab_size", "262208"}, {"hidden_size", "2304"}, {"intermediate_size", "9216"}, {"num_hidden_layers", "26"},
	{"num_attention_heads", "8"}, {"num_key_value_heads", "4"}, {"head_dim", "256"},
	{"max_position_embeddings", "131072"}, {"sliding_window", "4096"}, {"tie_word_embeddings", "true"}}}

// gemma3DefaultPattern is Gemma3TextConfig's sliding_window_pattern: one
// full-attention layer in every 6.
const gemma3DefaultPattern = 6

// parse reads a standard dense decoder with q/k norms and attention_bias
// (false when absent), Gemma3TextConfig's defaults for what the config
// leaves out (a note names them), and the layer kinds from layer_types,
// else from sliding_window_pattern P (default 6): layer i is
// sliding_attention unless (i+1) % P == 0, as Gemma3TextConfig derives
// layer_types.
func (gemma3Text) parse(r *fieldReader, c *ModelConfig) {
	if note := gemma3TextDefaults.fill(r); note != "" {
		c.Notes = append(c.Notes, note)
	}
	c.Family = FamilyDense
	c.QKNorm = true
	parseCore(r, c)
	c.AttentionBias = r.bool("attention_bias")
	resolveHeadDim(r, c, "head_dim")
	pattern := r.optional("sliding_window_pattern", gemma3DefaultPattern)
	mixers := standardMixers(r, c, func(n int64) []MixerKind {
		m := uniform(n, MixerSlidingAttention)
		for i := range m {
			if int64(i+1)%pattern == 0 {
				m[i] = MixerFullAttention
			}
		}
		return m
	})
	buildLayers(r, c, mixers, uniform(c.NumLayers, FFNDense))
}

// layers adds every layer's four RMSNorms, GQA attention and dense MLP.
func (gemma3Text) layers(w *weightBuilder) {
	n := w.cfg.Counts
	all := int64(len(w.cfg.Layers))
	w.layerNorms("layers.", all)
	w.t("layers.pre_feedforward_layernorm", "norms", kindVector, all, w.cfg.HiddenSize)
	w.t("layers.post_feedforward_layernorm", "norms", kindVector, all, w.cfg.HiddenSize)
	w.gqa("layers.", n.Attention())
	w.ffn("layers.", n, ffnStyle{})
}

// gemma3Projector adds Gemma3MultiModalProjector: mm_input_projection_weight
// [Hv, H] (an nn.Parameter, stored as applied) and mm_soft_emb_norm [Hv].
func gemma3Projector(w *weightBuilder) {
	hv := w.cfg.Vision.HiddenSize
	const p, g = "multi_modal_projector.", groupProjector
	w.vt(p+"mm_input_projection_weight", g, kindVector, 1, hv, w.cfg.HiddenSize)
	w.vt(p+"mm_soft_emb_norm.weight", g, kindVector, 1, hv)
}
