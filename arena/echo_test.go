package arena

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"short", "glm4_moe", "glm4_moe"},
		{"empty", "", ""},
		{"64 runes", strings.Repeat("x", 64), strings.Repeat("x", 64)},
		{"65 runes", strings.Repeat("x", 65), strings.Repeat("x", 64) + "… (65 bytes)"},
		{"multi-byte runes", strings.Repeat("é", 100), strings.Repeat("é", 64) + "… (200 bytes)"},
		{"invalid UTF-8", "a\xffb", "a\uFFFDb"},
		{"one megabyte", strings.Repeat("x", 1<<20), strings.Repeat("x", 64) + "… (1048576 bytes)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := clip(tt.in); got != tt.want {
				t.Errorf("clip = %q, want %q", got, tt.want)
			}
			if got := excerpt([]byte(tt.in)); got != tt.want {
				t.Errorf("excerpt = %q, want %q", got, tt.want)
			}
		})
	}
}

// maxEchoError bounds every config error's message, whatever the input:
// the longest, the refusal of an unknown MoE model_type, quotes model_type
// and at most 14 expert fields, each value cut to 64 runes (≤ 256 B).
const maxEchoError = 8 << 10

// TestErrorsEchoBounded: a megabyte in any field an error quotes is cut
// to 64 runes and its length; the message stays short.
func TestErrorsEchoBounded(t *testing.T) {
	const llama, nemo = "llama-3.1-8b.json", "nemotron-h-8b-base-8k.json"
	mega := `"` + strings.Repeat("x", 1<<20) + `"`
	tests := []struct {
		name   string
		data   []byte
		field  string
		target error
	}{
		{"unknown model_type missing a field", mutate(t, llama, map[string]string{"model_type": mega, "intermediate_size": ""}),
			"intermediate_size", ErrInvalidConfig},
		{"unknown MoE model_type", mutate(t, llama, map[string]string{"model_type": mega, "n_routed_experts": "160"}),
			"model_type", ErrUnsupportedMoE},
		{"expert field value", mutate(t, llama, map[string]string{"model_type": `"foo"`, "num_experts": mega}),
			"model_type", ErrUnsupportedMoE},
		{"layer_types entry", mutate(t, llama, map[string]string{"num_hidden_layers": "1", "layer_types": `[` + mega + `]`}),
			"layer_types[0]", ErrInvalidConfig},
		{"hybrid_override_pattern", mutate(t, nemo, map[string]string{"hybrid_override_pattern": mega}),
			"hybrid_override_pattern", ErrInvalidConfig},
		{"string for a size", mutate(t, llama, map[string]string{"hidden_size": mega}), "hidden_size", ErrInvalidConfig},
		{"number for a string", mutate(t, llama, map[string]string{"torch_dtype": strings.Repeat("9", 1<<20)}), "torch_dtype", ErrInvalidConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig(tt.data)
			var ce *ConfigError
			if !errors.Is(err, tt.target) || !errors.As(err, &ce) || ce.Field != tt.field {
				t.Fatalf("err = %.300v, want a *ConfigError on %q wrapping %v", err, tt.field, tt.target)
			}
			msg := err.Error()
			if len(msg) > maxEchoError || !utf8.ValidString(msg) {
				t.Errorf("message of %d bytes (valid UTF-8: %v), want at most %d: %.300s…", len(msg), utf8.ValidString(msg), maxEchoError, msg)
			}
			if v, ok := ce.Value.(string); ok && utf8.RuneCountInString(v) > 64+len("… (1048576 bytes)") {
				t.Errorf("Value of %d runes", utf8.RuneCountInString(v))
			}
			if tt.field != "model_type" || ce.Value != nil {
				if !strings.Contains(msg, "(1048576 bytes)") && !strings.Contains(msg, "(1048578 bytes)") {
					t.Errorf("message does not give the value's full length: %.300s", msg)
				}
			}
		})
	}
}

// TestNotesEchoBounded: values that notes quote (an unknown model_type,
// torch_dtype, quant_method, expert_dtype, mamba_ssm_cache_dtype) are cut
// too, in the plan's and the fit's notes.
func TestNotesEchoBounded(t *testing.T) {
	big := `"` + strings.Repeat("é", 1<<17) + `"` // 256 KiB: four of them fit MaxConfigBytes
	data := mutate(t, "nemotron-3-nano-30b-a3b.json", map[string]string{
		"torch_dtype": big, "expert_dtype": big, "mamba_ssm_cache_dtype": big,
		"quantization_config": `{"quant_method":` + big + `}`,
	})
	cfg, err := ParseConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := PlanFor(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Fit(plan, cfg, DeviceMemory{TotalBytes: 141 << 30, FreeBytes: 141 << 30}, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	notes := append(append([]string(nil), r.Notes...), r.Weights.Notes...)
	notes = append(notes, r.KV.Notes...)
	cut := 0
	for _, n := range notes {
		if len(n) > 512 {
			t.Errorf("note of %d bytes: %.200s…", len(n), n)
		}
		if strings.Contains(n, "… (262144 bytes)") {
			cut++
		}
	}
	if cut < 4 {
		t.Errorf("%d notes quote a cut value, want torch_dtype, quant_method, expert_dtype and mamba_ssm_cache_dtype: %q", cut, notes)
	}

	unknown, err := ParseConfig(mutate(t, "llama-3.1-8b.json", map[string]string{"model_type": big}))
	if err != nil {
		t.Fatal(err)
	}
	if len(unknown.Notes) != 1 || len(unknown.Notes[0]) > 512 || !strings.Contains(unknown.Notes[0], "(262144 bytes)\": planned as dense") {
		t.Errorf("unknown model_type notes %.300q", unknown.Notes)
	}
}
