package arena

import (
	"errors"
	"path/filepath"
	"testing"
)

// glm45 is GLM-4.5's config.json (355B: 92 layers, 3 dense, 160 routed
// experts, q/k norms), the larger sibling of examples/configs/glm-4.5-air.json.
var glm45 = filepath.Join("testdata", "glm-4.5-config.json")

// TestGLM4MoEWeightsByHand: GLM-4.5-Air, bf16, untied, worked out by hand
// from modeling_glm4_moe.py. H 4096, 46 layers (1 dense, 45 MoE), Hq 96,
// Hkv 8, D 128, V 151552, I 10944, E 128, K 8, Im 1408, 1 shared expert.
func TestGLM4MoEWeightsByHand(t *testing.T) {
	r, err := EstimateWeights(loadExample(t, "glm-4.5-air.json"), WeightOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// embed_tokens, lm_head: 151552 × 4096 = 620,756,992 each.
	// Attention per layer: q 4096·12288 + k, v 2 × 4096·1024 + o 12288·4096
	// = 109,051,904, q/k/v biases 12288 + 2·1024 = 14,336 → 109,066,240 × 46.
	// Norms: 2 × 4096 × 46 + final 4096. Dense MLP (layer 0): 3 × 4096 × 10944.
	// Per MoE layer: router 4096·128 + f32 bias 128; experts 128 × 3 × 4096 ×
	// 1408 = 2,214,592,512; shared 3 × 4096 × 1408 = 17,301,504; × 45.
	want := map[string]int64{
		"embedding":          620_756_992,
		"norms":              380_928,
		"attention":          5_017_047_040,
		"mlp":                134_479_872,
		"moe_router":         23_598_720,
		"moe_experts":        99_656_663_040,
		"moe_shared_experts": 778_567_680,
		"lm_head":            620_756_992,
	}
	const total = 106_852_251_264
	// Active: every tensor but the routed experts, plus 8 of 128 per MoE
	// layer: 45 × 8 × 17,301,504 = 6,228,541,440.
	const active = total - 99_656_663_040 + 6_228_541_440
	// 2 B per parameter, the 45 × 128 f32 router biases 2 B more each.
	const bytes = 2*total + 2*45*128
	if r.TotalParams != total || r.ActiveParams != active || r.Bytes != bytes {
		t.Errorf("total %d active %d bytes %d; want %d %d %d", r.TotalParams, r.ActiveParams, r.Bytes, total, active, bytes)
	}
	if r.ActiveParamsExclEmbedding != 12_803_372_672 {
		t.Errorf("active excl. embedding %d, want 12,803,372,672", r.ActiveParamsExclEmbedding)
	}
	for _, g := range r.Groups {
		if g.Params != want[g.Name] {
			t.Errorf("group %s: %d params, want %d", g.Name, g.Params, want[g.Name])
		}
		delete(want, g.Name)
	}
	if len(want) != 0 {
		t.Errorf("missing groups %v", want)
	}
	if r.MTPLayers != 0 || !hasNote(r.Notes, `MTP layers of model_type "glm4_moe" are not modelled`) {
		t.Errorf("MTP layers %d, notes %q", r.MTPLayers, r.Notes)
	}
	checkWeightInvariants(t, "glm-4.5-air.json", r)
}

// TestGLM4MoEKVByHand: 46 full-attention layers × 2 (K, V) × 8 KV heads ×
// 128 × 2 B = 188,416 B per token; no sliding window, no state.
func TestGLM4MoEKVByHand(t *testing.T) {
	l, err := NewKVLayout(loadExample(t, "glm-4.5-air.json"), 16)
	if err != nil {
		t.Fatal(err)
	}
	want := KVLayout{BlockTokens: 16, PagedLayers: 46, BytesPerToken: 188_416, BytesPerBlock: 16 * 188_416}
	if !kvEqual(l, want) {
		t.Errorf("got  %+v\nwant %+v", l, want)
	}
}

// TestGLM45MatchesPublishedCounts: the same formulas give GLM-4.5 355B
// total and 32B active (zai-org/GLM-4.5 model card) within 3%: 352.80B
// (0.6% under) and 32.86B without the input embedding (2.7% over).
func TestGLM45MatchesPublishedCounts(t *testing.T) {
	cfg, err := LoadConfig(glm45)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.QKNorm || !cfg.AttentionBias || cfg.Counts != (LayerCounts{FullAttention: 92, MoE: 89, DenseMLP: 3}) {
		t.Errorf("qk_norm %v bias %v counts %+v", cfg.QKNorm, cfg.AttentionBias, cfg.Counts)
	}
	r, err := EstimateWeights(cfg, WeightOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.TotalParams != 352_797_829_024 || !within(r.TotalParams, 355_000_000_000, 0.03) {
		t.Errorf("total %d, want 352,797,829,024 (355B)", r.TotalParams)
	}
	if !within(r.ActiveParamsExclEmbedding, 32_000_000_000, 0.03) {
		t.Errorf("active excl. embedding %d, want 32B within 3%%", r.ActiveParamsExclEmbedding)
	}
}

// TestGLM4MoEParse: defaults, flags and the fields glm4_moe requires.
func TestGLM4MoEParse(t *testing.T) {
	const air = "glm-4.5-air.json"
	tests := []struct {
		name   string
		fields map[string]string
		counts LayerCounts
		shared int64
		bias   bool
		field  string // the *ConfigError's field; "" for none
	}{
		{"as published", nil, LayerCounts{FullAttention: 46, MoE: 45, DenseMLP: 1}, 1408, true, ""},
		{"defaults", map[string]string{"n_shared_experts": "", "first_k_dense_replace": "", "attention_bias": ""},
			LayerCounts{FullAttention: 46, MoE: 45, DenseMLP: 1}, 1408, false, ""},
		{"three dense, two shared", map[string]string{"first_k_dense_replace": "3", "n_shared_experts": "2"},
			LayerCounts{FullAttention: 46, MoE: 43, DenseMLP: 3}, 2816, true, ""},
		{"all dense", map[string]string{"first_k_dense_replace": "100"},
			LayerCounts{FullAttention: 46, DenseMLP: 46}, 1408, true, ""},
		{"no experts", map[string]string{"n_routed_experts": ""}, LayerCounts{}, 0, false, "n_routed_experts"},
		{"negative first_k_dense_replace", map[string]string{"first_k_dense_replace": "-1"}, LayerCounts{}, 0, false, "first_k_dense_replace"},
		{"dense layer without intermediate_size", map[string]string{"intermediate_size": ""}, LayerCounts{}, 0, false, "intermediate_size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseConfig(mutate(t, air, tt.fields))
			if tt.field != "" {
				var ce *ConfigError
				if !errors.As(err, &ce) || ce.Field != tt.field {
					t.Fatalf("err = %v, want a *ConfigError on %s", err, tt.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Family != FamilyMoE || cfg.Counts != tt.counts || cfg.SharedExpertIntermediateSize != tt.shared ||
				cfg.AttentionBias != tt.bias || cfg.QKNorm {
				t.Errorf("family %v counts %+v shared %d bias %v qk_norm %v", cfg.Family, cfg.Counts,
					cfg.SharedExpertIntermediateSize, cfg.AttentionBias, cfg.QKNorm)
			}
		})
	}
}
