package arena

// qwen25VL: Qwen2.5-VL (modeling_qwen2_5_vl.py
// Qwen2_5_VLForConditionalGeneration, model_type qwen2_5_vl): a Qwen2
// language model (attention biases; model_type qwen2_5_vl_text when a
// newer config nests it under text_config, else its fields sit at the top
// level, as Qwen/Qwen2.5-VL-7B-Instruct's config.json keeps them) and
// Qwen2.5-VL's vision transformer, whose patch merger is the projector
// (VisionQwen25VL). Its checkpoint names the language model model.* and
// the tower visual.*.
var qwen25VL = multimodal{text: "qwen2_5_vl_text", visionType: "qwen2_5_vl", projector: mergerInTower}

// mergerInTower is the projector of a model whose vision tower ends in its
// own projector (Qwen2.5-VL's patch merger, visual.merger): nothing more.
func mergerInTower(*weightBuilder) {}

func init() {
	registerFamily(qwen25VL, "qwen2_5_vl")
	registerFamily(qwen2{}, "qwen2_5_vl_text")
}
