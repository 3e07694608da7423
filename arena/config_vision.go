package arena

import "fmt"

// VisionKind is the architecture of a vision tower, chosen by
// vision_config.model_type; it decides which tensors EstimateWeights
// prices (weights_vision.go).
type VisionKind uint8

// The vision towers.
const (
	// VisionSigLIP is "siglip_vision_model" (modeling_siglip.py
	// SiglipVisionTransformer): Gemma-3, PaliGemma.
	VisionSigLIP VisionKind = iota + 1
	// VisionCLIP is "clip_vision_model" (modeling_clip.py
	// CLIPVisionTransformer): LLaVA-1.5.
	VisionCLIP
	// VisionQwen25VL is Qwen2.5-VL's vision_config, model_type
	// "qwen2_5_vl" (modeling_qwen2_5_vl.py
	// Qwen2_5_VisionTransformerPretrainedModel, its patch merger included).
	VisionQwen25VL
	// VisionPixtral is "pixtral" (modeling_pixtral.py PixtralVisionModel):
	// Mistral-3.
	VisionPixtral
	// VisionViT is any other vision_config.model_type: priced as a plain
	// ViT of its hidden_size, intermediate_size and layers (a patch
	// convolution, per layer q/k/v/o and a two-layer MLP with biases and
	// two LayerNorms), an estimate a note calls one. Its checkpoint names
	// are not listed.
	VisionViT
)

var visionKindNames = [...]string{
	VisionSigLIP:   "siglip",
	VisionCLIP:     "clip",
	VisionQwen25VL: "qwen2_5_vl",
	VisionPixtral:  "pixtral",
	VisionViT:      "vit",
}

// String is the tower's name ("siglip", "qwen2_5_vl", "vit").
func (k VisionKind) String() string {
	if int(k) >= len(visionKindNames) || visionKindNames[k] == "" {
		return fmt.Sprintf("vision_kind(%d)", uint8(k))
	}
	return visionKindNames[k]
}

// visionKinds maps the vision_config model_types arena names to their kind.
var visionKinds = map[string]VisionKind{
	"siglip_vision_model": VisionSigLIP,
	"clip_vision_model":   VisionCLIP,
	"qwen2_5_vl":          VisionQwen25VL,
	"pixtral":             VisionPixtral,
}

// VisionConfig is a multimodal model's vision tower as vision_config
// states it, with its class's defaults for the fields it leaves out (a
// note names them). Sizes are in elements.
type VisionConfig struct {
	// ModelType is vision_config.model_type as written, else the
	// multimodal family's default ("siglip_vision_model").
	ModelType string
	// Kind is the tower ModelType names.
	Kind VisionKind
	// HiddenSize is the tower's width (hidden_size).
	HiddenSize int64
	// IntermediateSize is its MLP's width (intermediate_size).
	IntermediateSize int64
	// NumLayers is its encoder layers (num_hidden_layers; Qwen2.5-VL depth).
	NumLayers int64
	// NumChannels is the image channels (num_channels; Qwen2.5-VL
	// in_channels, earlier in_chans).
	NumChannels int64
	// PatchSize is the patch side in pixels (patch_size).
	PatchSize int64
	// ImageSize is the image side in pixels (image_size), which sets the
	// learned position embeddings of SigLIP and CLIP; 0 for the towers
	// without them.
	ImageSize int64
	// TemporalPatchSize is Qwen2.5-VL's frames per patch
	// (temporal_patch_size); 0 for the others.
	TemporalPatchSize int64
	// SpatialMergeSize is Qwen2.5-VL's patch merger side
	// (spatial_merge_size, its merger's input is HiddenSize ×
	// SpatialMergeSize²); 0 for the others.
	SpatialMergeSize int64
	// OutHiddenSize is Qwen2.5-VL's merger output (out_hidden_size, the
	// language model's hidden_size); 0 for the others.
	OutHiddenSize int64
	// UseHead is SigLIP's vision_use_head: the attention-pooling head's
	// weights are part of the tower.
	UseHead bool
	// FeatureLayers is how many of the tower's layers the projector reads
	// side by side: the entries of the top level's vision_feature_layer
	// when it is a list, else 1 (LLaVA, Mistral-3).
	FeatureLayers int64
	// ProjectorBias is the top level's multimodal_projector_bias, else the
	// family's default (LlavaConfig true, Mistral3Config false).
	ProjectorBias bool
}

// visionDefaults are each tower's config class defaults.
var visionDefaults = map[VisionKind]classDefaults{
	VisionSigLIP: {class: "SiglipVisionConfig", file: "configuration_siglip.py", fields: []fieldDefault{
		{"hidden_size", "768"}, {"intermediate_size", "3072"}, {"num_hidden_layers", "12"},
		{"num_channels", "3"}, {"image_size", "224"}, {"patch_size", "16"}, {"vision_use_head", "true"}}},
	VisionCLIP: {class: "CLIPVisionConfig", file: "configuration_clip.py", fields: []fieldDefault{
		{"hidden_size", "768"}, {"intermediate_size", "3072"}, {"num_hidden_layers", "12"},
		{"num_channels", "3"}, {"image_size", "224"}, {"patch_size", "32"}}},
	VisionQwen25VL: {class: "Qwen2_5_VLVisionConfig", file: "configuration_qwen2_5_vl.py", fields: []fieldDefault{
		{"depth", "32"}, {"hidden_size", "3584"}, {"intermediate_size", "3420"}, {"patch_size", "14"},
		{"spatial_merge_size", "2"}, {"temporal_patch_size", "2"}, {"out_hidden_size", "3584"}}},
	VisionPixtral: {class: "PixtralVisionConfig", file: "configuration_pixtral.py", fields: []fieldDefault{
		{"hidden_size", "1024"}, {"intermediate_size", "4096"}, {"num_hidden_layers", "24"},
		{"num_channels", "3"}, {"patch_size", "16"}}},
}

// parseVision reads vision_config of r (the top-level reader) into a
// VisionConfig: the tower its model_type names (else m.visionType), its
// class's defaults for the fields it lacks (with a note in c.Notes), every
// size positive; and the projector's fields of the top level
// (vision_feature_layer, multimodal_projector_bias, spatial_merge_size
// when vision_config lacks it, else m.mergeSize). Absent vision_config is
// an error naming the model_type: the tower is part of the model's
// weights. A tower arena does not name is priced as VisionViT, with a
// note, and needs hidden_size, intermediate_size, num_hidden_layers (or
// depth) and patch_size.
func parseVision(r *fieldReader, c *ModelConfig, m multimodal) *VisionConfig {
	if r.err != nil {
		return nil
	}
	vr := r.object("vision_config")
	if vr == nil {
		if r.err == nil {
			r.fail("vision_config", nil, fmt.Sprintf("is required for model_type %q: the vision tower's weights are part of the model", clip(c.ModelType)))
		}
		return nil
	}
	v := &VisionConfig{ModelType: vr.str("model_type")}
	if v.ModelType == "" {
		v.ModelType = m.visionType
	}
	kind, known := visionKinds[v.ModelType]
	if !known {
		kind = VisionViT
		c.Notes = append(c.Notes, fmt.Sprintf("vision_config.model_type %q is not a vision tower arena names: "+
			"its weights are estimated as a ViT of hidden_size, intermediate_size and num_hidden_layers", clip(v.ModelType)))
	}
	v.Kind = kind
	if d, ok := visionDefaults[kind]; ok {
		if note := d.fill(vr); note != "" {
			c.Notes = append(c.Notes, note)
		}
	}
	v.HiddenSize = vr.required("hidden_size")
	v.IntermediateSize = vr.required("intermediate_size")
	if vr.has("depth") {
		v.NumLayers = vr.required("depth")
	} else {
		v.NumLayers = vr.required("num_hidden_layers")
	}
	// num_channels, else in_channels (Qwen2.5-VL), else in_chans (its
	// original config); 3 when all are absent, every class's default.
	v.NumChannels = vr.optional("num_channels", 0)
	if v.NumChannels == 0 {
		v.NumChannels = vr.optional("in_channels", 0)
	}
	if v.NumChannels == 0 {
		v.NumChannels = vr.optional("in_chans", 3)
	}
	v.PatchSize = vr.required("patch_size")
	switch kind {
	case VisionSigLIP, VisionCLIP:
		v.ImageSize = vr.required("image_size")
		v.UseHead = vr.bool("vision_use_head")
		if vr.err == nil && v.ImageSize%v.PatchSize != 0 {
			vr.fail("image_size", v.ImageSize, fmt.Sprintf("is not a multiple of patch_size (%d)", v.PatchSize))
		}
	case VisionQwen25VL:
		v.TemporalPatchSize = vr.required("temporal_patch_size")
		v.OutHiddenSize = vr.required("out_hidden_size")
	}
	if vr.has("spatial_merge_size") {
		v.SpatialMergeSize = vr.required("spatial_merge_size")
	} else {
		v.SpatialMergeSize = r.optional("spatial_merge_size", m.mergeSize)
	}
	if vr.err != nil && r.err == nil {
		r.err = vr.err
	}
	v.FeatureLayers = 1
	if raw := r.raw("vision_feature_layer"); raw != nil && raw[0] == '[' {
		if n := arrayLen(raw); n > 0 {
			v.FeatureLayers = int64(n)
		}
	}
	v.ProjectorBias = m.projectorBias
	if r.has("multimodal_projector_bias") {
		v.ProjectorBias = r.bool("multimodal_projector_bias")
	}
	if r.err != nil {
		return nil
	}
	return v
}
