package arena

import (
	"errors"
	"path/filepath"
	"testing"
)

// TestGemma3WeightsByHand: google/gemma-3-27b-it (V 262,208 from
// Gemma3TextConfig's default, H 5376, 62 layers, Hq 32, Hkv 16, D 128, I
// 21504) counted by hand:
//
//	embed_tokens 262208 × 5376                                 1,409,630,208
//	per layer: q, o 5376·4096 × 2; k, v 5376·2048 × 2; q_norm,
//	  k_norm 128 × 2; gate, up, down 5376·21504 × 3; 4 norms 5376 412,898,560
//	× 62 layers                                               25,599,710,720
//	final norm                                                         5,376
//	lm_head: tied, counted once as embed_tokens                            0
//	SigLIP: patch 1152·3·14·14 + 1152, positions 64² × 1152,
//	  27 × (2 LayerNorms, q/k/v/out 1152² with biases, fc1 1152·4304
//	  + 4304, fc2 4304·1152 + 1152) = 27 × 15,239,504, post LayerNorm 416,866,032
//	projector 1152·5376 + 1152                                     6,194,304
//	total                                                     27,432,406,640
//
// × 2 B = 54,864,813,280 B, medgemma-27b-it's published total_size (the
// same architecture). Active: the language model, 27,009,346,304.
func TestGemma3WeightsByHand(t *testing.T) {
	cfg := loadExample(t, "gemma-3-27b-it.json")
	if cfg.ModelType != "gemma3" || cfg.TextModelType != "gemma3_text" || cfg.VocabSize != 262208 || !cfg.TieWordEmbeddings ||
		cfg.MaxPositionEmbeddings != 131072 || !cfg.QKNorm || cfg.AttentionBias || cfg.SlidingWindow != 1024 {
		t.Fatalf("config %+v", cfg)
	}
	for _, i := range []int{0, 4, 6, 60, 61} {
		if cfg.Layers[i].Mixer != MixerSlidingAttention {
			t.Errorf("layer %d: %v, want sliding_attention", i, cfg.Layers[i].Mixer)
		}
	}
	for _, i := range []int{5, 11, 59} {
		if cfg.Layers[i].Mixer != MixerFullAttention {
			t.Errorf("layer %d: %v, want full_attention", i, cfg.Layers[i].Mixer)
		}
	}
	if !hasNote(cfg.Notes, "Gemma3TextConfig's defaults (configuration_gemma3.py), absent in the config: "+
		"text_config.vocab_size = 262208, text_config.max_position_embeddings = 131072, text_config.tie_word_embeddings = true") {
		t.Errorf("notes %q", cfg.Notes)
	}
	r, err := EstimateWeights(cfg, WeightOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const lm, vision, projector = 27_009_346_304, 416_866_032, 6_194_304
	if r.TotalParams != lm+vision+projector || r.ActiveParams != lm || r.Bytes != 54_864_813_280 || r.EmbeddingParams != 1_409_630_208 {
		t.Errorf("total %d, active %d, %d B, embedding %d", r.TotalParams, r.ActiveParams, r.Bytes, r.EmbeddingParams)
	}
	if g := findGroup(t, r.Groups, "vision_tower"); g.Params != vision || g.ActiveParams != 0 {
		t.Errorf("vision tower %+v", g)
	}
	if g := findGroup(t, r.Groups, "multimodal_projector"); g.Params != projector {
		t.Errorf("projector %+v", g)
	}
	for _, g := range r.Groups {
		if g.Name == "lm_head" {
			t.Errorf("a tied lm_head is counted: %+v", g)
		}
	}
	if !hasNote(r.Notes, "lm_head shares embed_tokens and is counted once") {
		t.Errorf("notes %q", r.Notes)
	}
	// The KV cache: 10 full layers paged, 52 of a 1024-token window, K and
	// V of 16 × 128 each: 16 × 2 × 16 × 128 × 2 = 131,072 B per layer and
	// block.
	l, err := NewKVLayout(cfg, 16)
	if err != nil || l.PagedLayers != 10 || l.SlidingLayers != 52 || l.SlidingWindow != 1024 || l.BytesPerBlock != 10*131_072 {
		t.Errorf("kv %+v, %v", l, err)
	}
}

// TestGemma3TextByHand: google/gemma-3-1b-it, the text-only gemma3_text
// (H 1152, 26 layers, Hq 4, Hkv 1, D 256, I 6912, V 262,144, window 512):
// embed 262144 × 1152 = 301,989,888; per layer q, o 1152·1024 × 2, k, v
// 1152·256 × 2, q/k norms 256 × 2, MLP 1152·6912 × 3, 4 norms = 26,842,112
// × 26 = 697,894,912; final norm 1152; the head tied: 999,885,952 params,
// 1,999,771,904 B, what its checkpoint holds. Layers 5, 11, 17 and 23 are
// full attention.
func TestGemma3TextByHand(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join("testdata", "gemma-3-1b-it-config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TextModelType != "" || cfg.Vision != nil || cfg.Counts != (LayerCounts{FullAttention: 4, SlidingAttention: 22, DenseMLP: 26}) {
		t.Fatalf("text %q vision %v counts %+v", cfg.TextModelType, cfg.Vision, cfg.Counts)
	}
	r, err := EstimateWeights(cfg, WeightOptions{})
	if err != nil || r.TotalParams != 999_885_952 || r.Bytes != 1_999_771_904 {
		t.Fatalf("%d params, %d B, %v", r.TotalParams, r.Bytes, err)
	}
	ts, err := CheckpointTensors(cfg, WeightOptions{})
	if err != nil || ts[0].Name != "model.embed_tokens.weight" || ts[len(ts)-1].Name != "model.norm.weight" || len(ts) != 1+26*13+1 {
		t.Errorf("%d tensors, %v", len(ts), err)
	}
}

// TestGemma3WindowPattern: layer_types wins over sliding_window_pattern;
// without either, Gemma3TextConfig's pattern of 6; a pattern ≤ 0 is
// refused.
func TestGemma3WindowPattern(t *testing.T) {
	types := `["sliding_attention","full_attention","sliding_attention"]`
	cfg, err := ParseConfig([]byte(`{"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 3,
		"num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32, "sliding_window": 16, "layer_types": ` + types + `}`))
	if err != nil || cfg.Layers[1].Mixer != MixerFullAttention || cfg.Counts.SlidingAttention != 2 {
		t.Fatalf("layer_types: %v, %+v", err, cfg)
	}
	cfg, err = ParseConfig([]byte(`{"model_type": "gemma3_text", "num_hidden_layers": 12, "sliding_window_pattern": 4}`))
	if err != nil || cfg.Counts != (LayerCounts{FullAttention: 3, SlidingAttention: 9, DenseMLP: 12}) || cfg.HiddenSize != 2304 {
		t.Fatalf("pattern 4: %v, %+v", err, cfg)
	}
	var ce *ConfigError
	if _, err := ParseConfig([]byte(`{"model_type": "gemma3_text", "sliding_window_pattern": 0}`)); !errors.As(err, &ce) || ce.Field != "sliding_window_pattern" {
		t.Errorf("pattern 0: %v", err)
	}
}
