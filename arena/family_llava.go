package arena

// llava: LLaVA (modeling_llava.py LlavaForConditionalGeneration, model_type
// llava): a language model under text_config (llama unless it says
// otherwise; LLaVA-1.5's states only model_type, vocab_size and
// max_position_embeddings, so LlamaConfig's defaults give the rest), a CLIP
// vision tower, and LlavaMultiModalProjector: linear_1 [Hv·F, H] and
// linear_2 [H, H], with biases unless multimodal_projector_bias is false
// (F: the layers vision_feature_layer lists, 1 for one index). Its
// checkpoint (llava-hf) names the language model language_model.model.*.
var llava = multimodal{text: "llama", visionType: "clip_vision_model",
	projector: llavaProjector, root: "language_model.model", lmHead: "language_model.lm_head", projectorBias: true}

func init() { registerFamily(llava, "llava") }

// llavaProjector adds LlavaMultiModalProjector's two linears.
func llavaProjector(w *weightBuilder) {
	c := w.cfg
	const p, g = "multi_modal_projector.", groupProjector
	bias := c.Vision.ProjectorBias
	w.linear(p+"linear_1", g, 1, w.mul(c.Vision.HiddenSize, c.Vision.FeatureLayers), c.HiddenSize, bias)
	w.linear(p+"linear_2", g, 1, c.HiddenSize, c.HiddenSize, bias)
}
