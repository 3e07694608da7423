package arena

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseExampleConfigs(t *testing.T) {
	tests := []struct {
		file     string
		family   Family
		headDim  int64
		counts   LayerCounts
		experts  int64 // E
		topK     int64 // K
		im       int64 // Im
		sharedIm int64
		dtype    string
	}{
		{"llama-3.1-8b.json", FamilyDense, 128, LayerCounts{FullAttention: 32, DenseMLP: 32}, 0, 0, 0, 0, "bfloat16"},
		{"qwen3-8b.json", FamilyDense, 128, LayerCounts{FullAttention: 36, DenseMLP: 36}, 0, 0, 0, 0, "bfloat16"},
		{"qwen3-32b.json", FamilyDense, 128, LayerCounts{FullAttention: 64, DenseMLP: 64}, 0, 0, 0, 0, "bfloat16"},
		{"qwen3-30b-a3b.json", FamilyMoE, 128, LayerCounts{FullAttention: 48, MoE: 48}, 128, 8, 768, 0, "bfloat16"},
		// Mixtral experts use intermediate_size.
		{"mixtral-8x7b-v0.1.json", FamilyMoE, 128, LayerCounts{FullAttention: 32, MoE: 32}, 8, 2, 14336, 0, "bfloat16"},
		// (i+1) % 4 == 0 → 12 full attention, 36 GDN.
		{"qwen3-next-80b-a3b-thinking.json", FamilyGDNHybrid, 256, LayerCounts{FullAttention: 12, GDN: 36, MoE: 48}, 512, 10, 512, 512, "bfloat16"},
		// first_k_dense_replace 3 → 3 dense + 58 MoE; D = 128 + 64; shared = 1 × 2048.
		{"deepseek-v3.json", FamilyMLA, 192, LayerCounts{FullAttention: 61, MoE: 58, DenseMLP: 3}, 256, 8, 2048, 2048, "bfloat16"},
		// compress_ratios[:43]: 0,0 then (4,128)×20 then 4 → 2 sliding, 41 compressed.
		{"deepseek-v4-flash.json", FamilyDeepSeekV4, 512, LayerCounts{SlidingAttention: 2, CompressedAttention: 41, MoE: 43}, 256, 6, 2048, 2048, "bfloat16"},
		{"deepseek-v4-pro.json", FamilyDeepSeekV4, 512, LayerCounts{CompressedAttention: 61, MoE: 61}, 384, 6, 3072, 3072, "bfloat16"},
		{"nemotron-h-8b-base-8k.json", FamilyMamba2Hybrid, 128, LayerCounts{FullAttention: 4, Mamba2: 24, DenseMLP: 24}, 0, 0, 0, 0, "bfloat16"},
		{"nemotron-h-56b-base-8k.json", FamilyMamba2Hybrid, 128, LayerCounts{FullAttention: 10, Mamba2: 54, DenseMLP: 54}, 0, 0, 0, 0, "bfloat16"},
		{"nemotron-3-nano-30b-a3b.json", FamilyMamba2Hybrid, 128, LayerCounts{FullAttention: 6, Mamba2: 23, MoE: 23}, 128, 6, 1856, 3712, "bfloat16"},
		// layer_types alternate sliding/full.
		{"gpt-oss-20b.json", FamilyMoE, 64, LayerCounts{FullAttention: 12, SlidingAttention: 12, MoE: 24}, 32, 4, 2880, 0, ""},
		{"gpt-oss-120b.json", FamilyMoE, 64, LayerCounts{FullAttention: 18, SlidingAttention: 18, MoE: 36}, 128, 4, 2880, 0, ""},
		// first_k_dense_replace 1 → 1 dense + 45 MoE; shared = 1 × 1408.
		{"glm-4.5-air.json", FamilyMoE, 128, LayerCounts{FullAttention: 46, MoE: 45, DenseMLP: 1}, 128, 8, 1408, 1408, "bfloat16"},
		// text_config: sliding_window_pattern 6 (Gemma3TextConfig's
		// default) → full attention at layers 5, 11, ..., 59: 10 of 62.
		// torch_dtype from the top level.
		{"gemma-3-27b-it.json", FamilyDense, 128, LayerCounts{FullAttention: 10, SlidingAttention: 52, DenseMLP: 62}, 0, 0, 0, 0, "bfloat16"},
		{"qwen3-0.6b.json", FamilyDense, 128, LayerCounts{FullAttention: 28, DenseMLP: 28}, 0, 0, 0, 0, "bfloat16"},
		// Flat Qwen2 fields; sliding_window dropped (use_sliding_window false).
		{"qwen2.5-vl-7b-instruct.json", FamilyDense, 128, LayerCounts{FullAttention: 28, DenseMLP: 28}, 0, 0, 0, 0, "bfloat16"},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		seen[tt.file] = true
		t.Run(tt.file, func(t *testing.T) {
			c := loadExample(t, tt.file)
			if c.Family != tt.family || c.HeadDim != tt.headDim || c.Counts != tt.counts {
				t.Errorf("family %v head_dim %d counts %+v; want %v %d %+v", c.Family, c.HeadDim, c.Counts, tt.family, tt.headDim, tt.counts)
			}
			if c.NumExperts != tt.experts || c.NumExpertsPerTok != tt.topK || c.MoEIntermediateSize != tt.im || c.SharedExpertIntermediateSize != tt.sharedIm {
				t.Errorf("E %d K %d Im %d shared %d; want %d %d %d %d", c.NumExperts, c.NumExpertsPerTok,
					c.MoEIntermediateSize, c.SharedExpertIntermediateSize, tt.experts, tt.topK, tt.im, tt.sharedIm)
			}
			if c.TorchDType != tt.dtype {
				t.Errorf("torch_dtype %q, want %q", c.TorchDType, tt.dtype)
			}
			if int64(len(c.Layers)) != c.NumLayers {
				t.Errorf("%d layers for num_hidden_layers %d", len(c.Layers), c.NumLayers)
			}
		})
	}
	for _, p := range exampleConfigs(t) {
		if !seen[filepath.Base(p)] {
			t.Errorf("%s has no expectations in TestParseExampleConfigs", filepath.Base(p))
		}
	}
}

func TestParseFamilyDetails(t *testing.T) {
	next := loadExample(t, "qwen3-next-80b-a3b-thinking.json")
	for i, l := range next.Layers {
		want := MixerGDN
		if (i+1)%4 == 0 {
			want = MixerFullAttention
		}
		if l.Mixer != want {
			t.Errorf("qwen3_next layer %d mixer %v, want %v", i, l.Mixer, want)
		}
	}
	if g := next.GDN; !next.GatedAttention || g == nil || *g != (GDNConfig{16, 32, 128, 128, 4}) {
		t.Errorf("qwen3_next gated %v GDN %+v", next.GatedAttention, g)
	}

	dsv3 := loadExample(t, "deepseek-v3.json")
	if m := dsv3.MLA; m == nil || *m != (MLAConfig{1536, 512, 64, 128, 128}) {
		t.Errorf("deepseek_v3 MLA %+v", m)
	}
	if q := dsv3.Quantization; q == nil || q.Method != "fp8" || q.Format != "e4m3" || len(q.WeightBlockSize) != 2 || q.WeightBlockSize[0] != 128 {
		t.Errorf("deepseek_v3 quantization %+v", q)
	}
	for i := 0; i < 3; i++ {
		if dsv3.Layers[i].FFN != FFNDense || dsv3.Layers[i+3].FFN != FFNMoE {
			t.Errorf("deepseek_v3 layer %d/%d FFN %v/%v", i, i+3, dsv3.Layers[i].FFN, dsv3.Layers[i+3].FFN)
		}
	}

	flash := loadExample(t, "deepseek-v4-flash.json")
	v := flash.DeepSeekV4
	if v == nil || v.OGroups != 8 || v.OLoRARank != 1024 || v.HCMult != 4 || v.QLoRARank != 1024 || v.IndexHeadDim != 128 || len(v.CompressRatios) != 43 {
		t.Fatalf("deepseek_v4 %+v", v)
	}
	if flash.NumKVHeads != 1 || flash.SlidingWindow != 128 || flash.ExpertDType != "fp4" {
		t.Errorf("deepseek_v4 Hkv %d window %d expert dtype %q", flash.NumKVHeads, flash.SlidingWindow, flash.ExpertDType)
	}

	nano := loadExample(t, "nemotron-3-nano-30b-a3b.json")
	if m := nano.Mamba; m == nil || *m != (MambaConfig{64, 64, 4096, 128, 8, 4, 128}) {
		t.Errorf("nemotron nano Mamba %+v", m)
	}
	if !hasNote(nano.Notes, "4096 (expand × hidden_size would be 5376)") {
		t.Errorf("nemotron nano notes %q lack the d_inner note", nano.Notes)
	}
	if nano.Layers[1] != (Layer{FFN: FFNMoE}) || nano.Layers[5] != (Layer{Mixer: MixerFullAttention}) {
		t.Errorf("nemotron nano layers 1, 5 = %+v, %+v", nano.Layers[1], nano.Layers[5])
	}

	mixtral := loadExample(t, "mixtral-8x7b-v0.1.json")
	if mixtral.SlidingWindow != 0 {
		t.Errorf("mixtral sliding_window null parsed as %d", mixtral.SlidingWindow)
	}

	gpt := loadExample(t, "gpt-oss-20b.json")
	if q := gpt.Quantization; q == nil || q.Method != "mxfp4" || len(q.ModulesToNotConvert) != 4 {
		t.Errorf("gpt_oss quantization %+v", q)
	}
	if gpt.Layers[0].Mixer != MixerSlidingAttention || gpt.Layers[1].Mixer != MixerFullAttention {
		t.Errorf("gpt_oss layers 0, 1 = %v, %v", gpt.Layers[0].Mixer, gpt.Layers[1].Mixer)
	}
}

func hasNote(notes []string, sub string) bool {
	for _, n := range notes {
		if strings.Contains(n, sub) {
			return true
		}
	}
	return false
}

// mutate returns the example config with fields replaced (a value of "" deletes the field).
func mutate(t *testing.T, file string, fields map[string]string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "examples", "configs", file))
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	for k, v := range fields {
		if v == "" {
			delete(obj, k)
		} else {
			obj[k] = json.RawMessage(v)
		}
	}
	out, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestParseConfigErrors(t *testing.T) {
	const llama, next, dsv3, dsv4, nemo = "llama-3.1-8b.json", "qwen3-next-80b-a3b-thinking.json",
		"deepseek-v3.json", "deepseek-v4-flash.json", "nemotron-h-8b-base-8k.json"
	tests := []struct {
		name  string
		data  []byte
		field string
		value any
	}{
		{"empty file", []byte(""), "", nil},
		{"blank file", []byte(" \n\t"), "", nil},
		{"not JSON", []byte("{\"hidden_size\": "), "", nil},
		{"JSON array", []byte("[1, 2]"), "", nil},
		{"JSON null", []byte("null"), "", nil},
		{"empty object", []byte("{}"), "hidden_size", nil},
		{"missing hidden_size", mutate(t, llama, map[string]string{"hidden_size": ""}), "hidden_size", nil},
		{"null hidden_size", mutate(t, llama, map[string]string{"hidden_size": "null"}), "hidden_size", nil},
		{"zero hidden_size", mutate(t, llama, map[string]string{"hidden_size": "0"}), "hidden_size", int64(0)},
		{"negative hidden_size", mutate(t, llama, map[string]string{"hidden_size": "-4096"}), "hidden_size", int64(-4096)},
		{"string hidden_size", mutate(t, llama, map[string]string{"hidden_size": `"4096"`}), "hidden_size", `"4096"`},
		{"fractional hidden_size", mutate(t, llama, map[string]string{"hidden_size": "4096.5"}), "hidden_size", "4096.5"},
		{"hidden_size past int64", mutate(t, llama, map[string]string{"hidden_size": "99999999999999999999"}), "hidden_size", "99999999999999999999"},
		{"hidden_size 1e30", mutate(t, llama, map[string]string{"hidden_size": "1e30"}), "hidden_size", "1e30"},
		{"zero layers", mutate(t, llama, map[string]string{"num_hidden_layers": "0"}), "num_hidden_layers", int64(0)},
		{"too many layers", mutate(t, llama, map[string]string{"num_hidden_layers": "1000000"}), "num_hidden_layers", int64(1000000)},
		{"zero heads", mutate(t, llama, map[string]string{"num_attention_heads": "0"}), "num_attention_heads", int64(0)},
		{"heads do not divide hidden", mutate(t, llama, map[string]string{"hidden_size": "4095"}), "num_attention_heads", int64(32)},
		{"kv heads do not divide", mutate(t, llama, map[string]string{"num_key_value_heads": "5"}), "num_key_value_heads", int64(5)},
		{"kv heads over heads", mutate(t, llama, map[string]string{"num_key_value_heads": "64"}), "num_key_value_heads", int64(64)},
		{"negative vocab", mutate(t, llama, map[string]string{"vocab_size": "-1"}), "vocab_size", int64(-1)},
		{"vocab past int32 token ids", mutate(t, llama, map[string]string{"vocab_size": "2147483648"}), "vocab_size", int64(2147483648)},
		{"dense without intermediate", mutate(t, llama, map[string]string{"intermediate_size": ""}), "intermediate_size", nil},
		{"zero head_dim", mutate(t, "qwen3-8b.json", map[string]string{"head_dim": "0"}), "head_dim", int64(0)},
		{"bad dtype type", mutate(t, llama, map[string]string{"torch_dtype": "16"}), "torch_dtype", "16"},
		{"bad tie flag", mutate(t, llama, map[string]string{"tie_word_embeddings": `"yes"`}), "tie_word_embeddings", `"yes"`},
		{"model_type not a string", mutate(t, llama, map[string]string{"model_type": "7"}), "model_type", "7"},
		{"layer_types too short", mutate(t, "gpt-oss-20b.json", map[string]string{"layer_types": `["full_attention","sliding_attention"]`}), "layer_types", int64(2)},
		{"layer_types unknown entry", mutate(t, llama, map[string]string{"num_hidden_layers": "2", "layer_types": `["full_attention","chunked_attention"]`}), "layer_types[1]", "chunked_attention"},
		{"sliding without window", mutate(t, "gpt-oss-20b.json", map[string]string{"sliding_window": "null"}), "sliding_window", nil},
		{"mixtral without experts", mutate(t, "mixtral-8x7b-v0.1.json", map[string]string{"num_local_experts": ""}), "num_local_experts", nil},
		{"qwen3_moe without experts", mutate(t, "qwen3-30b-a3b.json", map[string]string{"num_experts": "0"}), "num_experts", nil},
		{"top-k over experts", mutate(t, "mixtral-8x7b-v0.1.json", map[string]string{"num_experts_per_tok": "9"}), "num_experts_per_tok", int64(9)},
		{"mlp_only_layers out of range", mutate(t, "qwen3-30b-a3b.json", map[string]string{"mlp_only_layers": "[48]"}), "mlp_only_layers[0]", int64(48)},
		{"mlp_only_layers without intermediate", mutate(t, "qwen3-30b-a3b.json", map[string]string{"mlp_only_layers": "[0]", "intermediate_size": ""}), "intermediate_size", nil},
		{"gdn missing key heads", mutate(t, next, map[string]string{"linear_num_key_heads": ""}), "linear_num_key_heads", nil},
		{"gdn value heads not multiple", mutate(t, next, map[string]string{"linear_num_value_heads": "33"}), "linear_num_value_heads", int64(33)},
		{"no interval", mutate(t, next, map[string]string{"full_attention_interval": ""}), "full_attention_interval", nil},
		{"zero interval", mutate(t, next, map[string]string{"full_attention_interval": "0"}), "full_attention_interval", int64(0)},
		{"mla missing kv_lora_rank", mutate(t, dsv3, map[string]string{"kv_lora_rank": ""}), "kv_lora_rank", nil},
		{"mla negative first dense", mutate(t, dsv3, map[string]string{"first_k_dense_replace": "-1"}), "first_k_dense_replace", int64(-1)},
		{"mla shared expert overflow", mutate(t, dsv3, map[string]string{"n_shared_experts": "9223372036854775807"}), "n_shared_experts", int64(9223372036854775807)},
		{"bad quantization block", mutate(t, dsv3, map[string]string{"quantization_config": `{"quant_method":"fp8","weight_block_size":["a"]}`}), "quantization_config.weight_block_size[0]", `"a"`},
		{"quantization not object", mutate(t, dsv3, map[string]string{"quantization_config": `"fp8"`}), "quantization_config", `"fp8"`},
		{"v4 short compress_ratios", mutate(t, dsv4, map[string]string{"compress_ratios": "[0, 4]"}), "compress_ratios", int64(2)},
		{"v4 missing compress_ratios", mutate(t, dsv4, map[string]string{"compress_ratios": ""}), "compress_ratios", nil},
		{"v4 negative ratio", mutate(t, dsv4, map[string]string{"num_hidden_layers": "2", "compress_ratios": "[0, -4]"}), "compress_ratios[1]", int64(-4)},
		{"v4 o_groups do not divide", mutate(t, dsv4, map[string]string{"o_groups": "7"}), "o_groups", int64(7)},
		{"v4 rope over head_dim", mutate(t, dsv4, map[string]string{"qk_rope_head_dim": "512"}), "qk_rope_head_dim", int64(512)},
		{"v4 missing head_dim", mutate(t, dsv4, map[string]string{"head_dim": ""}), "head_dim", nil},
		{"nemotron pattern length", mutate(t, nemo, map[string]string{"hybrid_override_pattern": `"M-M*"`}), "hybrid_override_pattern", "M-M*"},
		{"nemotron pattern char", mutate(t, nemo, map[string]string{"num_hidden_layers": "4", "hybrid_override_pattern": `"M-X*"`}), "hybrid_override_pattern[2]", "X"},
		{"nemotron missing pattern", mutate(t, nemo, map[string]string{"hybrid_override_pattern": ""}), "hybrid_override_pattern", nil},
		{"nemotron missing mamba heads", mutate(t, nemo, map[string]string{"mamba_num_heads": ""}), "mamba_num_heads", nil},
		{"nemotron groups do not divide", mutate(t, nemo, map[string]string{"n_groups": "3"}), "n_groups", int64(3)},
		{"nemotron MoE without experts", mutate(t, nemo, map[string]string{"num_hidden_layers": "2", "hybrid_override_pattern": `"ME"`}), "n_routed_experts", nil},
		{"unknown type without intermediate", mutate(t, llama, map[string]string{"model_type": `"foo"`, "intermediate_size": ""}), "intermediate_size", nil},
		{"unknown type without vocab", mutate(t, llama, map[string]string{"model_type": `"foo"`, "vocab_size": ""}), "vocab_size", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseConfig(tt.data)
			if err == nil {
				t.Fatalf("ParseConfig succeeded: %+v", cfg)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("errors.Is(%v, ErrInvalidConfig) = false", err)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("errors.As(%v, *ConfigError) = false", err)
			}
			if ce.Field != tt.field || ce.Value != tt.value {
				t.Errorf("field %q value %#v, want %q %#v (%v)", ce.Field, ce.Value, tt.field, tt.value, err)
			}
			if tt.field != "" && !strings.Contains(err.Error(), `"`+tt.field+`"`) {
				t.Errorf("message %q does not name %q", err, tt.field)
			}
		})
	}
}

func TestParseConfigErrorMessages(t *testing.T) {
	_, err := ParseConfig(mutate(t, "llama-3.1-8b.json", map[string]string{"hidden_size": "-4096"}))
	if want := `arena: config field "hidden_size" = -4096: must be positive`; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
	_, err = ParseConfig([]byte("{"))
	var syntax *json.SyntaxError
	if !errors.As(err, &syntax) {
		t.Errorf("not-JSON error %v does not wrap the *json.SyntaxError", err)
	}
	_, err = ParseConfig(mutate(t, "llama-3.1-8b.json", map[string]string{"model_type": `"foo"`, "intermediate_size": ""}))
	if err == nil || !strings.Contains(err.Error(), `unknown model_type "foo": planned as dense`) {
		t.Errorf("unknown-type error %v does not explain the dense fallback", err)
	}
}

func TestUnknownModelTypePlannedAsDense(t *testing.T) {
	cfg, err := ParseConfig(mutate(t, "llama-3.1-8b.json", map[string]string{"model_type": `"foo_lm"`}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Family != FamilyDense || cfg.Counts != (LayerCounts{FullAttention: 32, DenseMLP: 32}) {
		t.Errorf("family %v counts %+v", cfg.Family, cfg.Counts)
	}
	plan, err := PlanFor(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasNote(plan.Notes, `unknown model_type "foo_lm": planned as dense`) {
		t.Errorf("plan notes %q lack the dense note", plan.Notes)
	}
	// Same sizes as llama itself.
	_, llama := planExample(t, "llama-3.1-8b.json", Options{})
	if plan.TotalBytes != llama.TotalBytes {
		t.Errorf("TotalBytes %d, llama's %d", plan.TotalBytes, llama.TotalBytes)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file err = %v, want os.ErrNotExist", err)
	}
	path := filepath.Join(t.TempDir(), "empty.json")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadConfig(path)
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), path) {
		t.Errorf("empty file err = %v, want ErrInvalidConfig naming the path", err)
	}
}

func TestParseConfigAcceptsIntegralFloats(t *testing.T) {
	cfg, err := ParseConfig(mutate(t, "llama-3.1-8b.json", map[string]string{"hidden_size": "4096.0", "vocab_size": "1.28256e5"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HiddenSize != 4096 || cfg.VocabSize != 128256 {
		t.Errorf("hidden %d vocab %d", cfg.HiddenSize, cfg.VocabSize)
	}
}
