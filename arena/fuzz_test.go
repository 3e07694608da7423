package arena

import (
	"errors"
	"os"
	"testing"
)

// FuzzParseAndPlan: ParseConfig and PlanFor never panic; every error is a
// typed one; a plan's bytes add up; Fit on a plan never panics.
func FuzzParseAndPlan(f *testing.F) {
	for _, path := range exampleConfigs(f) {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			var ce *ConfigError
			if !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &ce) {
				t.Fatalf("untyped parse error %v", err)
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
		}
	})
}
