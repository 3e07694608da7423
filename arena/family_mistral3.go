package arena

// mistral3: Mistral-3 (modeling_mistral3.py
// Mistral3ForConditionalGeneration, model_type mistral3, Mistral Small
// 3.1): a mistral language model under text_config, a Pixtral vision
// tower, and Mistral3MultiModalProjector: norm (RMSNorm [Hv]),
// patch_merger.merging_layer [Hv·S², Hv] without bias (S: the top level's
// spatial_merge_size, Mistral3Config's default 2), linear_1 [Hv·F, H] and linear_2 [H, H], with biases
// only when multimodal_projector_bias is true. Its checkpoint names the
// language model language_model.model.*.
var mistral3 = multimodal{text: "mistral", visionType: "pixtral",
	projector: mistral3Projector, root: "language_model.model", lmHead: "language_model.lm_head", mergeSize: 2}

func init() { registerFamily(mistral3, "mistral3") }

// mistral3Projector adds Mistral3MultiModalProjector's tensors.
func mistral3Projector(w *weightBuilder) {
	c, v := w.cfg, w.cfg.Vision
	const p, g = "multi_modal_projector.", groupProjector
	w.vt(p+"norm.weight", g, kindVector, 1, v.HiddenSize)
	w.linear(p+"patch_merger.merging_layer", g, 1, w.mul(v.HiddenSize, v.SpatialMergeSize, v.SpatialMergeSize), v.HiddenSize, false)
	w.linear(p+"linear_1", g, 1, w.mul(v.HiddenSize, v.FeatureLayers), c.HiddenSize, v.ProjectorBias)
	w.linear(p+"linear_2", g, 1, c.HiddenSize, c.HiddenSize, v.ProjectorBias)
}
