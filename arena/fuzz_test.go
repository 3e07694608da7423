package arena

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// fuzzSeeds are small configs for the paths the example configs do not
// take: unknown MoE model types, arrays past their limits, long values.
var fuzzSeeds = []string{
	`{"model_type":"foo_moe","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100,"intermediate_size":128,"num_local_experts":8,"num_experts_per_tok":2}`,
	`{"model_type":"foo_lm","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100,"intermediate_size":128,"num_experts":0,"moe_intermediate_size":null}`,
	`{"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100,"intermediate_size":128,"n_routed_experts":4}`,
	`{"model_type":"llama","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100,"intermediate_size":128,"architectures":` +
		jsonList(`"A"`, MaxArchitectures+1) + `}`,
	`{"model_type":"llama","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100,"intermediate_size":128,"layer_types":["full_attention","a,\"b]"]}`,
	`{"model_type":"llama","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100,"intermediate_size":128,"layer_types":[["full_attention"],{"a":[1,2]}]}`,
	`{"model_type":"` + strings.Repeat("é", 2000) + `","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100}`,
}

// FuzzParseAndPlan: ParseConfig and PlanFor never panic; every error is a
// typed one whose message stays bounded (values are cut); a plan's bytes
// add up; Fit on a plan never panics.
func FuzzParseAndPlan(f *testing.F) {
	for _, path := range append(exampleConfigs(f), acmeMoE, glm45) {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			var ce *ConfigError
			if !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &ce) {
				t.Fatalf("untyped parse error %v", err)
			}
			if len(err.Error()) > maxEchoError {
				t.Fatalf("parse error of %d bytes: %.300s…", len(err.Error()), err)
			}
			return
		}
		if int64(len(cfg.Layers)) != cfg.NumLayers || cfg.Counts != countLayers(cfg.Layers) {
			t.Fatalf("%d layers for num_hidden_layers %d, counts %+v", len(cfg.Layers), cfg.NumLayers, cfg.Counts)
		}
		for _, opts := range []Options{
			{},
			{MaxBatchTokens: 64, MaxBatchSize: 4, MaxSeqLen: 1000, KVBlockSize: 32, LoRAMaxRank: 8, FP8Rowwise: true, Q2Prefill: true},
		} {
			plan, err := PlanFor(cfg, opts)
			if err != nil {
				if !errors.Is(err, ErrOverflow) && !errors.Is(err, ErrInvalidOption) {
					t.Fatalf("untyped plan error %v", err)
				}
				continue
			}
			checkPlanInvariants(t, plan)
			r, err := Fit(plan, cfg, DeviceMemory{TotalBytes: 141 << 30, FreeBytes: 100 << 30}, FitOptions{})
			if err != nil {
				if !errors.Is(err, ErrOverflow) {
					t.Fatalf("untyped fit error %v", err)
				}
				continue
			}
			checkFitInvariants(t, r)
			if len(r.Notes) < len(plan.Notes) {
				t.Fatalf("fit notes %q lack the plan's %q", r.Notes, plan.Notes)
			}
		}
	})
}
