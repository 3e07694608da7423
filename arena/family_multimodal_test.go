package arena

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena/checkpoint"
)

// TestQwen25VLWeightsByHand: Qwen/Qwen2.5-VL-7B-Instruct counted by hand.
//
//	language model (Qwen2, q/k/v biases): embed and lm_head 152064 × 3584
//	  × 2; 28 × (q, o 3584² ; k, v 3584·512; biases 3584 + 512 × 2;
//	  gate, up, down 3584·18944; 2 norms) = 28 × 233,057,792; norm   7,615,616,512
//	vision: patch Conv3d 1280·3·2·14·14 = 1,505,280; 32 blocks × (2
//	  norms, qkv 1280·3840 + 3840, proj 1280² + 1280, gate/up 1280·3420
//	  + 3420, down 3420·1280 + 1280) = 32 × 19,702,200; merger ln_q
//	  1280, mlp.0 5120² + 5120, mlp.2 5120·3584 + 3584                  676,550,144
//	total 8,292,166,656 params, × 2 B = 16,584,333,312 B, the published
//	total_size (TestWeightsMatchPublishedTotalSize).
//
// The newer layout (transformers ≥ 4.52: text_config of model_type
// qwen2_5_vl_text, vision_config's in_channels) sizes the same.
func TestQwen25VLWeightsByHand(t *testing.T) {
	const lm, vision = 7_615_616_512, 676_550_144
	flat := loadExample(t, "qwen2.5-vl-7b-instruct.json")
	var obj map[string]any
	if err := json.Unmarshal(mutate(t, "qwen2.5-vl-7b-instruct.json", nil), &obj); err != nil {
		t.Fatal(err)
	}
	text := map[string]any{"model_type": "qwen2_5_vl_text"}
	for _, k := range []string{"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
		"vocab_size", "max_position_embeddings", "sliding_window", "use_sliding_window", "tie_word_embeddings", "rope_scaling"} {
		text[k] = obj[k]
		delete(obj, k)
	}
	obj["text_config"] = text
	vc := obj["vision_config"].(map[string]any)
	vc["in_channels"], vc["model_type"] = vc["in_chans"], "qwen2_5_vl"
	delete(vc, "in_chans")
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	nested, err := ParseConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]*ModelConfig{"flat": flat, "nested": nested} {
		r, err := EstimateWeights(cfg, WeightOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cfg.TextModelType != "qwen2_5_vl_text" || !cfg.AttentionBias || cfg.SlidingWindow != 0 || cfg.Vision.Kind != VisionQwen25VL ||
			cfg.Vision.NumChannels != 3 || cfg.Vision.NumLayers != 32 || r.TotalParams != lm+vision || r.ActiveParams != lm ||
			findGroup(t, r.Groups, "vision_tower").Params != vision {
			t.Errorf("%s: text %q, vision %+v, %d params (%d active)", name, cfg.TextModelType, cfg.Vision, r.TotalParams, r.ActiveParams)
		}
	}
}

// TestLlavaByHand: llava-hf/llava-1.5-7b-hf, whose text_config leaves the
// sizes to LlamaConfig (H 4096, I 11008, 32 layers, 32 heads) and states V
// 32064:
//
//	language model: embed and lm_head 32064·4096 × 2; 32 × (4 · 4096²
//	  + 3 · 4096·11008 + 2 · 4096); norm                          6,738,939,904
//	CLIP ViT-L/14-336: class 1024, patch 1024·3·14·14, positions 577 ×
//	  1024, pre LayerNorm 2048, 24 × 12,596,224, post LayerNorm    303,507,456
//	projector: 1024·4096 + 4096, 4096² + 4096                        20,979,712
//	total                                                          7,063,427,072
//
// "7.06B" on the model card. torch_dtype float16 comes from text_config.
func TestLlavaByHand(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join("testdata", "llava-1.5-7b-hf-config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HiddenSize != 4096 || cfg.VocabSize != 32064 || cfg.MaxPositionEmbeddings != 4096 || cfg.TorchDType != "float16" ||
		!hasNote(cfg.Notes, "LlamaConfig's defaults (configuration_llama.py), absent in the config: text_config.hidden_size = 4096") {
		t.Fatalf("config %+v", cfg)
	}
	r, err := EstimateWeights(cfg, WeightOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.TotalParams != 7_063_427_072 || r.ActiveParams != 6_738_939_904 || findGroup(t, r.Groups, "vision_tower").Params != 303_507_456 ||
		findGroup(t, r.Groups, "multimodal_projector").Params != 20_979_712 {
		t.Errorf("%d params, %d active, groups %+v", r.TotalParams, r.ActiveParams, r.Groups)
	}
	ts, err := CheckpointTensors(cfg, WeightOptions{})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string][]int64{}
	for _, s := range ts {
		names[s.Name] = s.Shape
	}
	for name, shape := range map[string][]int64{
		"language_model.lm_head.weight":                                     {32064, 4096},
		"vision_tower.vision_model.embeddings.class_embedding":              {1024},
		"vision_tower.vision_model.embeddings.position_embedding.weight":    {577, 1024},
		"vision_tower.vision_model.pre_layrnorm.weight":                     {1024},
		"vision_tower.vision_model.encoder.layers.23.self_attn.k_proj.bias": {1024},
		"multi_modal_projector.linear_1.weight":                             {4096, 1024},
		"multi_modal_projector.linear_2.bias":                               {4096},
	} {
		if got, ok := names[name]; !ok || !slices.Equal(got, shape) {
			t.Errorf("%s: %v (listed %v), want %v", name, got, ok, shape)
		}
	}
}

// TestMistral3ByHand: Mistral Small 3.1 24B (Mistral3ForConditionalGeneration):
//
//	language model: embed and lm_head 131072·5120 × 2; 40 × (q, o
//	  5120·4096; k, v 5120·1024; MLP 3 · 5120·32768; 2 norms); norm  23,572,403,200
//	Pixtral: patch 1024·3·14·14, ln_pre, 24 × (2 norms, 4 · 1024², 3 ·
//	  1024·4096)                                                        403,305,472
//	projector: norm 1024, merging 4096·1024, linear_1 1024·5120,
//	  linear_2 5120², no biases                                          35,652,608
//	total                                                            24,011,361,280
func TestMistral3ByHand(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join("testdata", "mistral-small-3.1-24b-config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TextModelType != "mistral" || cfg.HeadDim != 128 || cfg.Vision.Kind != VisionPixtral || cfg.Vision.SpatialMergeSize != 2 || cfg.Vision.ProjectorBias {
		t.Fatalf("config %+v, vision %+v", cfg, cfg.Vision)
	}
	r, err := EstimateWeights(cfg, WeightOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.TotalParams != 24_011_361_280 || r.ActiveParams != 23_572_403_200 || findGroup(t, r.Groups, "multimodal_projector").Params != 35_652_608 {
		t.Errorf("%d params, %d active, groups %+v", r.TotalParams, r.ActiveParams, r.Groups)
	}
	ts, err := CheckpointTensors(cfg, WeightOptions{})
	if err != nil || listingBytes(t, ts) != r.CheckpointBytes {
		t.Fatalf("listing: %v", err)
	}
	for _, want := range []string{"vision_tower.transformer.layers.23.feed_forward.down_proj.weight",
		"multi_modal_projector.patch_merger.merging_layer.weight", "language_model.model.layers.39.mlp.up_proj.weight"} {
		if !listed(ts, want) {
			t.Errorf("%s is not listed", want)
		}
	}
}

// TestMultimodalRefused: what a multimodal config must have, refused with a
// *ConfigError naming the field.
func TestMultimodalRefused(t *testing.T) {
	tests := []struct {
		name, field string
		fields      map[string]string
	}{
		{"no vision_config", "vision_config", map[string]string{"vision_config": ""}},
		{"text_config a string", "text_config", map[string]string{"text_config": `"gemma"`}},
		{"text_config multimodal", "text_config.model_type", map[string]string{"text_config": `{"model_type": "llava"}`}},
		{"text_config nests text_config", "text_config.model_type", map[string]string{"text_config": `{"model_type": "llama", "text_config": {}}`}},
		{"image not in patches", "vision_config.image_size", map[string]string{"vision_config": `{"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "patch_size": 14, "image_size": 100}`}},
		{"vision layers zero", "vision_config.num_hidden_layers", map[string]string{"vision_config": `{"num_hidden_layers": 0}`}},
		{"text heads zero", "text_config.num_attention_heads", map[string]string{"text_config": `{"model_type": "gemma3_text", "num_attention_heads": 0}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig(mutate(t, "gemma-3-27b-it.json", tt.fields))
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.field || !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("err = %v, want a *ConfigError on %s", err, tt.field)
			}
		})
	}
}

// TestGenericMultimodal: a multimodal model_type arena does not register
// plans its text_config's language model and prices its vision tower;
// its projector is not known (a note) and its checkpoint names are not
// listed. One whose language model declares routed experts arena does not
// plan (Llama-4's llama4_text) is refused, naming text_config.
func TestGenericMultimodal(t *testing.T) {
	acme := mutate(t, "gemma-3-27b-it.json", map[string]string{"model_type": `"acme_vl"`})
	cfg, err := ParseConfig(acme)
	if err != nil {
		t.Fatal(err)
	}
	r, err := EstimateWeights(cfg, WeightOptions{})
	if err != nil || cfg.TextModelType != "gemma3_text" || findGroup(t, r.Groups, "vision_tower").Params != 416_866_032 ||
		!hasNote(cfg.Notes, `model_type "acme_vl": its multimodal projector's weights are not known`) {
		t.Fatalf("%v, text %q, notes %q", err, cfg.TextModelType, cfg.Notes)
	}
	if _, err := PlanFor(cfg, Options{}); err != nil {
		t.Error(err)
	}
	if _, err := CheckpointTensors(cfg, WeightOptions{}); !errors.Is(err, ErrNoCheckpointNames) {
		t.Errorf("CheckpointTensors: %v", err)
	}

	// A flat config of a model_type arena does not register (Qwen2-VL's
	// layout) is planned as dense; its vision tower is not counted, and
	// a note says so.
	flat, err := ParseConfig(mutate(t, "qwen2.5-vl-7b-instruct.json", map[string]string{"model_type": `"qwen2_vl"`}))
	if err != nil || flat.Vision != nil || !hasNote(flat.Notes, "vision_config: the vision tower of an unknown model_type is not counted") {
		t.Errorf("qwen2_vl: %v, notes %q", err, flat.Notes)
	}

	llama4 := mutate(t, "gemma-3-27b-it.json", map[string]string{"model_type": `"llama4"`,
		"text_config": `{"model_type": "llama4_text", "hidden_size": 5120, "num_local_experts": 16, "num_experts_per_tok": 1}`})
	_, err = ParseConfig(llama4)
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "text_config.model_type" || !errors.Is(err, ErrUnsupportedMoE) ||
		!strings.Contains(err.Error(), "llama4_text") || !strings.Contains(err.Error(), "num_local_experts = 16") {
		t.Errorf("llama4: %v", err)
	}
}

// TestVisionViTEstimate: a vision tower arena does not name is priced as
// a ViT, with a note, and its names are not listed. hidden 64, MLP 256,
// 2 layers, patch 16, 3 channels: patch 64·3·16·16 + 64 = 49,216; per
// layer 2 LayerNorms 256, q/k/v/o 64·256 + 256, fc1 64·256 + 256, fc2
// 256·64 + 64 = 49,984 → 99,968; 149,184 in all.
func TestVisionViTEstimate(t *testing.T) {
	cfg, err := ParseConfig(mutate(t, "gemma-3-27b-it.json", map[string]string{
		"vision_config": `{"model_type": "acme_vision", "hidden_size": 64, "intermediate_size": 256, "depth": 2, "patch_size": 16}`}))
	if err != nil {
		t.Fatal(err)
	}
	r, err := EstimateWeights(cfg, WeightOptions{})
	if err != nil || cfg.Vision.Kind != VisionViT || findGroup(t, r.Groups, "vision_tower").Params != 149_184 ||
		!hasNote(cfg.Notes, `vision_config.model_type "acme_vision" is not a vision tower arena names`) {
		t.Fatalf("%v, vision %+v, notes %q", err, cfg.Vision, cfg.Notes)
	}
	var ne *CheckpointNamesError
	if _, err := CheckpointTensors(cfg, WeightOptions{}); !errors.As(err, &ne) || !strings.Contains(ne.Reason, "acme_vision") {
		t.Errorf("CheckpointTensors: %v", err)
	}
}

// TestMultimodalHandBuilt: a multimodal ModelConfig without its Vision (one
// not built by ParseConfig) sizes the language model with a note.
func TestMultimodalHandBuilt(t *testing.T) {
	cfg := loadExample(t, "gemma-3-27b-it.json")
	cfg.Vision = nil
	r, err := EstimateWeights(cfg, WeightOptions{})
	if err != nil || r.TotalParams != 27_009_346_304 || !hasNote(r.Notes, "without a vision_config: no vision tower counted") {
		t.Errorf("%v, %d params, notes %q", err, r.TotalParams, r.Notes)
	}
	cfg.TextModelType = ""
	if _, err := PlanFor(cfg, Options{}); err != nil {
		t.Errorf("planned as the standard decoder: %v", err)
	}
}

// listed reports whether the listing has a tensor named name.
func listed(ts []checkpoint.TensorSpec, name string) bool {
	return slices.ContainsFunc(ts, func(s checkpoint.TensorSpec) bool { return s.Name == name })
}
