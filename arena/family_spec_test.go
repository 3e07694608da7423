package arena

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
)

// familySiblings maps each registered model_type that has no example
// config of its own to the example it is exercised with, model_type
// replaced.
var familySiblings = map[string]string{
	"mistral":         "llama-3.1-8b.json",
	"qwen2":           "qwen3-8b.json",
	"qwen2_moe":       "qwen3-30b-a3b.json",
	"deepseek_v2":     "deepseek-v3.json",
	"qwen2_5_vl_text": "qwen3-8b.json",
}

// familyFixtures maps each registered model_type that has no example
// config of its own to a real config of that model_type in testdata.
var familyFixtures = map[string]string{
	"gemma3_text": "gemma-3-1b-it-config.json",
	"llava":       "llava-1.5-7b-hf-config.json",
	"mistral3":    "mistral-small-3.1-24b-config.json",
}

// TestFamilyRegistry: every registered model_type is exercised by a config
// (its own in examples/configs or testdata, or a sibling's) that parses
// into its family and plans; an unregistered one falls back to
// unknownFamily.
func TestFamilyRegistry(t *testing.T) {
	examples := map[string]bool{}
	for _, p := range exampleConfigs(t) {
		examples[loadExample(t, filepath.Base(p)).ModelType] = true
	}
	for _, name := range knownModelTypes() {
		t.Run(name, func(t *testing.T) {
			if _, ok := specFor(name).(unknownFamily); ok {
				t.Errorf("specFor(%q) is unknownFamily", name)
			}
			if examples[name] {
				return
			}
			if fixture, ok := familyFixtures[name]; ok {
				cfg, err := LoadConfig(filepath.Join("testdata", fixture))
				if err != nil {
					t.Fatal(err)
				}
				if cfg.ModelType != name {
					t.Fatalf("%s: model_type %q", fixture, cfg.ModelType)
				}
				if _, err := PlanFor(cfg, Options{}); err != nil {
					t.Error(err)
				}
				return
			}
			sibling, ok := familySiblings[name]
			if !ok {
				t.Fatalf("model_type %q is registered but no config exercises it", name)
			}
			cfg, err := ParseConfig(mutate(t, sibling, map[string]string{"model_type": `"` + name + `"`}))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Family != loadExample(t, sibling).Family || len(cfg.Notes) != len(loadExample(t, sibling).Notes) {
				t.Errorf("family %v notes %q, want %s's", cfg.Family, cfg.Notes, sibling)
			}
			if _, err := PlanFor(cfg, Options{}); err != nil {
				t.Error(err)
			}
		})
	}
	if names := knownModelTypes(); !slices.IsSorted(names) || len(names) != len(families) {
		t.Errorf("knownModelTypes() = %v", names)
	}
	if _, ok := specFor("acme_lm").(unknownFamily); !ok {
		t.Errorf("specFor(acme_lm) = %T, want unknownFamily", specFor("acme_lm"))
	}
}

// TestRegisterFamilyTwicePanics: a model_type registered twice is a
// mistake in the source, found at init.
func TestRegisterFamilyTwicePanics(t *testing.T) {
	const name = "test_registry_dup"
	defer delete(families, name)
	registerFamily(llama{}, name)
	defer func() {
		if r := recover(); r != `arena: model_type "test_registry_dup" is registered twice` {
			t.Errorf("recover() = %v", r)
		}
	}()
	registerFamily(llama{}, name)
}

// TestHandBuiltConfigMissingSubConfig: a ModelConfig whose model_type's
// family reads a sub-config it lacks is a *ConfigError naming a field of
// that sub-config, from each entry point, never a panic.
func TestHandBuiltConfigMissingSubConfig(t *testing.T) {
	tests := []struct {
		file, field string
		clear       func(c *ModelConfig)
	}{
		{"deepseek-v3.json", "kv_lora_rank", func(c *ModelConfig) { c.MLA = nil }},
		{"deepseek-v4-flash.json", "o_groups", func(c *ModelConfig) { c.DeepSeekV4 = nil }},
	}
	for _, tt := range tests {
		cfg := loadExample(t, tt.file)
		tt.clear(cfg)
		calls := map[string]func() error{
			"PlanFor":         func() error { _, err := PlanFor(cfg, Options{}); return err },
			"NewKVLayout":     func() error { _, err := NewKVLayout(cfg, 16); return err },
			"EstimateWeights": func() error { _, err := EstimateWeights(cfg, WeightOptions{}); return err },
		}
		for name, call := range calls {
			t.Run(tt.file+"/"+name, func(t *testing.T) {
				var ce *ConfigError
				if err := call(); !errors.As(err, &ce) || ce.Field != tt.field || !errors.Is(err, ErrInvalidConfig) {
					t.Errorf("err = %v, want a *ConfigError on %s", err, tt.field)
				}
			})
		}
	}
}

// TestHandBuiltConfigWithoutMixerDims: a GDN or Mamba-2 hybrid without its
// dims plans its recurrent buffers and state as absent instead of panicking.
func TestHandBuiltConfigWithoutMixerDims(t *testing.T) {
	tests := []struct {
		file  string
		clear func(c *ModelConfig)
		id    BufferID
	}{
		{"qwen3-next-80b-a3b-thinking.json", func(c *ModelConfig) { c.GDN = nil }, SSMQKVZ},
		{"nemotron-h-8b-base-8k.json", func(c *ModelConfig) { c.Mamba = nil }, SSDScratch},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			cfg := loadExample(t, tt.file)
			tt.clear(cfg)
			plan, err := PlanFor(cfg, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if plan.Buffers[tt.id].Present() {
				t.Errorf("%v present without its dims", tt.id)
			}
			l, err := NewKVLayout(cfg, 16)
			if err != nil || l.StateLayers != 0 || l.StateBytesPerSeq != 0 {
				t.Errorf("state layers %d, %d B, err %v; want none", l.StateLayers, l.StateBytesPerSeq, err)
			}
			if _, err := EstimateWeights(cfg, WeightOptions{}); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestAttentionFlags: each family states its attention's extra tensors as
// ModelConfig flags.
func TestAttentionFlags(t *testing.T) {
	tests := []struct {
		modelType, file     string
		bias, qkNorm, gated bool
	}{
		{"llama", "llama-3.1-8b.json", false, false, false},
		{"mistral", "llama-3.1-8b.json", false, false, false},
		{"qwen2", "qwen3-8b.json", true, false, false},
		{"qwen3", "qwen3-8b.json", false, true, false},
		{"mixtral", "mixtral-8x7b-v0.1.json", false, false, false},
		{"qwen2_moe", "qwen3-30b-a3b.json", true, false, false},
		{"qwen3_moe", "qwen3-30b-a3b.json", false, true, false},
		{"gpt_oss", "gpt-oss-20b.json", true, false, false},
		{"qwen3_next", "qwen3-next-80b-a3b-thinking.json", false, true, true},
		{"deepseek_v3", "deepseek-v3.json", false, false, false},
		{"nemotron_h", "nemotron-h-8b-base-8k.json", false, false, false},
		{"foo_lm", "llama-3.1-8b.json", false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.modelType, func(t *testing.T) {
			cfg, err := ParseConfig(mutate(t, tt.file, map[string]string{"model_type": `"` + tt.modelType + `"`}))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.AttentionBias != tt.bias || cfg.QKNorm != tt.qkNorm || cfg.GatedAttention != tt.gated {
				t.Errorf("bias %v qk_norm %v gated %v; want %v %v %v", cfg.AttentionBias, cfg.QKNorm, cfg.GatedAttention,
					tt.bias, tt.qkNorm, tt.gated)
			}
		})
	}
}
