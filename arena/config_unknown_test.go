package arena

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// acmeMoE is the path of an MoE config.json whose model_type, acme_moe, no
// family registers: GLM-4.5's config (355B parameters, 160 routed experts
// per MoE layer) under a made-up model_type and architecture.
var acmeMoE = filepath.Join("testdata", "acme-moe-config.json")

// assertUnsupportedMoE checks that err refuses an unknown MoE model_type
// and that the message says each of wants.
func assertUnsupportedMoE(t *testing.T, err error, value any, wants ...string) {
	t.Helper()
	var ce *ConfigError
	if !errors.Is(err, ErrUnsupportedMoE) || !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *ConfigError wrapping ErrUnsupportedMoE and ErrInvalidConfig", err)
	}
	if ce.Field != "model_type" || ce.Value != value {
		t.Errorf("field %q value %#v, want model_type %#v", ce.Field, ce.Value, value)
	}
	for _, w := range append(wants, "routed experts", "qwen3_moe", "deepseek_v3", "add a parser") {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("message %q does not say %q", err, w)
		}
	}
}

// TestUnknownMoERefused: an unknown MoE model_type (GLM-4.5's sizes) used
// to be planned as a 31.46B dense model that fits one H200; it is refused,
// naming the expert fields.
func TestUnknownMoERefused(t *testing.T) {
	data, err := os.ReadFile(acmeMoE)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig(data)
	if cfg != nil {
		t.Errorf("ParseConfig returned a config: family %v, %d experts", cfg.Family, cfg.NumExperts)
	}
	assertUnsupportedMoE(t, err, "acme_moe", "n_routed_experts = 160", "num_experts_per_tok = 8",
		"moe_intermediate_size = 1536", "n_shared_experts = 1")

	_, err = LoadConfig(acmeMoE)
	assertUnsupportedMoE(t, err, "acme_moe", acmeMoE, "n_routed_experts = 160")
}

func TestUnknownMoEFields(t *testing.T) {
	const llama = "llama-3.1-8b.json"
	tests := []struct {
		field, value string
	}{
		{"n_routed_experts", "160"},
		{"num_local_experts", "8"},
		{"num_experts", "64"},
		{"moe_num_experts", "64"},
		{"n_experts", "16"},
		{"num_experts_per_tok", "8"},
		{"experts_per_token", "4"},
		{"moe_k", "8"},
		{"moe_topk", "[8,8]"},
		{"moe_intermediate_size", "1536"},
		{"n_shared_experts", "1"},
		{"num_shared_experts", "1"},
		{"moe_num_shared_experts", "2"},
		{"shared_expert_intermediate_size", "5632"},
		{"moe_shared_expert_intermediate_size", "3712"},
		{"num_experts", `"64"`},
	}
	for _, tt := range tests {
		t.Run(tt.field+"="+tt.value, func(t *testing.T) {
			_, err := ParseConfig(mutate(t, llama, map[string]string{"model_type": `"foo_moe"`, tt.field: tt.value}))
			assertUnsupportedMoE(t, err, "foo_moe", tt.field+" = "+tt.value)
		})
	}
	t.Run("dense model_type llama with experts", func(t *testing.T) {
		_, err := ParseConfig(mutate(t, llama, map[string]string{"num_local_experts": "8", "num_experts_per_tok": "2"}))
		assertUnsupportedMoE(t, err, "llama", "is a dense model type in arena", "num_local_experts = 8")
	})
	t.Run("model_type absent", func(t *testing.T) {
		_, err := ParseConfig(mutate(t, llama, map[string]string{"model_type": "", "n_routed_experts": "160"}))
		assertUnsupportedMoE(t, err, nil, "is absent", "n_routed_experts = 160")
	})
	// Fields set to nothing declare no experts: planned as dense, with the note.
	for _, v := range []string{"0", "0.0", "null", "false", `""`, "[]"} {
		t.Run("num_experts="+v, func(t *testing.T) {
			cfg, err := ParseConfig(mutate(t, llama, map[string]string{"model_type": `"foo_lm"`, "num_experts": v, "moe_intermediate_size": v}))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Family != FamilyDense || !hasNote(cfg.Notes, `unknown model_type "foo_lm": planned as dense`) {
				t.Errorf("family %v notes %q", cfg.Family, cfg.Notes)
			}
		})
	}
	// A known MoE model_type reads the same fields as before.
	if cfg := loadExample(t, "qwen3-30b-a3b.json"); cfg.NumExperts != 128 {
		t.Errorf("qwen3_moe experts %d", cfg.NumExperts)
	}
}

// TestFitCarriesPlanNotes: the fit report starts with the plan's notes, so
// an unknown model_type planned as dense says so in the fit too.
func TestFitCarriesPlanNotes(t *testing.T) {
	cfg, err := ParseConfig(mutate(t, "llama-3.1-8b.json", map[string]string{"model_type": `"foo_lm"`}))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := PlanFor(cfg, Options{MaxSeqLen: 262144, AllowLongMaxSeqLen: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Fit(plan, cfg, DeviceMemory{TotalBytes: 141 << 30, FreeBytes: 141 << 30}, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`plan: unknown model_type "foo_lm": planned as dense`,
		"plan: max_seq_len 262144 exceeds the model's limit of 131072 tokens (max_position_embeddings 131072): allowed by allow_long_max_seq_len",
	}
	if len(r.Notes) < 2 || r.Notes[0] != want[0] || r.Notes[1] != want[1] {
		t.Errorf("fit notes start %q, want %q", r.Notes[:min(2, len(r.Notes))], want)
	}
	out, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back struct{ Notes []string }
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Notes) < 1 || back.Notes[0] != want[0] {
		t.Errorf("JSON notes %q", back.Notes)
	}
}
