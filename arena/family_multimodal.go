package arena

import "fmt"

// multimodal is a vision-language model: a language model whose config
// nests it under text_config (or, as Qwen2.5-VL's original config, keeps
// its fields at the top level) and a vision tower in vision_config, joined
// by a projector. The language model is planned as its own family
// (ModelConfig.TextModelType); the vision tower and the projector only add
// weights (vision). Each multimodal family is one value of this type,
// registered from its family file (family_gemma3.go, family_qwen2_5_vl.go,
// family_llava.go, family_mistral3.go); genericMultimodal serves a
// model_type none registers whose config has a text_config.
type multimodal struct {
	// text is the language model's model_type when text_config states none
	// (or the config is flat).
	text string
	// visionType is the vision tower's model_type when vision_config
	// states none.
	visionType string
	// projector adds the projector's tensors; nil when the family's
	// projector is not known (genericMultimodal: a note says so).
	projector func(w *weightBuilder)
	// root and lmHead are the language model's module and LM head in the
	// checkpoint ("language_model.model" and "language_model.lm_head" for
	// Gemma3ForConditionalGeneration; "" keeps the text family's).
	root, lmHead string
	// projectorBias is the config class's multimodal_projector_bias
	// default; mergeSize its spatial_merge_size default (0: none).
	projectorBias bool
	mergeSize     int64
}

// genericMultimodal is the family of a model_type arena does not register
// whose config has a text_config: its language model is planned as
// text_config.model_type's family, its vision tower priced by its
// vision_config.model_type (VisionViT when unknown); its projector is not
// priced and its checkpoint names are not listed.
var genericMultimodal = multimodal{}

// textReader is the reader of the language model's fields: text_config's,
// or r itself for a flat config. ok is false after an error (in r.err).
func textReader(r *fieldReader) (text *fieldReader, ok bool) {
	if !r.has("text_config") {
		return r, r.err == nil
	}
	text = r.object("text_config")
	return text, text != nil
}

// parse reads the language model with its own family (text_config's
// model_type, else m.text), the top level's fields a nested text_config
// lacks (architectures, torch_dtype, quantization_config) and the vision
// tower (parseVision). The text family sees ModelType as the language
// model's model_type, so its messages name that; a text_config whose
// model_type is itself multimodal is refused. Errors in text_config name
// their field under it ("text_config.hidden_size").
func (m multimodal) parse(r *fieldReader, c *ModelConfig) {
	text, ok := textReader(r)
	if !ok {
		return
	}
	textType := m.text
	if text != r {
		if t := text.str("model_type"); t != "" {
			textType = t
		}
	}
	if _, nested := specFor(textType).(multimodal); text.err == nil && (nested || text != r && text.has("text_config")) {
		text.fail("model_type", clip(textType), "names a multimodal model: text_config must describe the language model itself")
	}
	if text.err != nil {
		r.err = text.err
		return
	}
	if d, ok := textConfigDefaults[textType]; ok && text != r {
		if note := d.fill(text); note != "" {
			c.Notes = append(c.Notes, note)
		}
	}
	own := c.ModelType
	c.ModelType = textType
	specFor(textType).parse(text, c)
	c.ModelType, c.TextModelType = own, textType
	if text != r {
		if r.err == nil {
			r.err = text.err
		}
		if c.Architectures == nil {
			c.Architectures = r.strings("architectures", architecturesLimit)
		}
		if c.TorchDType == "" {
			if c.TorchDType = r.str("torch_dtype"); c.TorchDType == "" {
				c.TorchDType = r.str("dtype")
			}
		}
		if c.Quantization == nil {
			c.Quantization = parseQuantization(r)
		}
	}
	if r.err != nil {
		return
	}
	c.Vision = parseVision(r, c, m)
	if c.Vision == nil {
		return
	}
	c.Notes = append(c.Notes, fmt.Sprintf("multimodal: the buffers and KV cache are the language model's (%s); "+
		"the %v vision tower adds weights, its activations and an engine's encoder cache are not planned", clip(c.TextModelType), c.Vision.Kind))
	if m.projector == nil {
		c.Notes = append(c.Notes, fmt.Sprintf("model_type %q: its multimodal projector's weights are not known and not counted", clip(c.ModelType)))
	}
}

// textConfigDefaults are the config class defaults of the language models
// that multimodal configs describe sparsely: LLaVA-1.5's text_config
// states model_type llama and leaves hidden_size, layers and heads to
// LlamaConfig's defaults. A flat config and a standalone text config get
// none: their family requires the fields.
var textConfigDefaults = map[string]classDefaults{
	"llama": {class: "LlamaConfig", file: "configuration_llama.py", fields: []fieldDefault{
		{"vocab_size", "32000"}, {"hidden_size", "4096"}, {"intermediate_size", "11008"},
		{"num_hidden_layers", "32"}, {"num_attention_heads", "32"}, {"max_position_embeddings", "2048"}}},
}

// textSpec is the family of c's language model.
func textSpec(c *ModelConfig) familySpec { return specFor(c.TextModelType) }

// shape is the language model's.
func (multimodal) shape(c *ModelConfig) (modelShape, error) { return textSpec(c).shape(c) }

// layers are the language model's.
func (multimodal) layers(w *weightBuilder) { textSpec(w.cfg).layers(w) }

// vision adds the vision tower (weights_vision.go) and the projector, in
// groups "vision_tower" and "multimodal_projector". A config without a
// VisionConfig (one built by hand) adds none, with a note.
func (m multimodal) vision(w *weightBuilder) {
	v := w.cfg.Vision
	if v == nil {
		w.notes = append(w.notes, fmt.Sprintf("model_type %q without a vision_config: no vision tower counted", clip(w.cfg.ModelType)))
		return
	}
	w.visionTower(v)
	if m.projector != nil {
		m.projector(w)
	}
}

// checkpointNames are the language model's, under m's root and lm_head;
// none for genericMultimodal.
func (m multimodal) checkpointNames(c *ModelConfig) (checkpointNaming, bool) {
	if m.text == "" {
		return checkpointNaming{}, false
	}
	namer, ok := textSpec(c).(checkpointNamer)
	if !ok {
		return checkpointNaming{}, false
	}
	n, ok := namer.checkpointNames(c)
	if m.root != "" {
		n.root = m.root
	}
	if m.lmHead != "" {
		n.lmHead = m.lmHead
	}
	return n, ok
}
