package arena

import (
	"errors"
	"os"
	"path/filepath"
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
	// A multimodal model_type arena does not register, a tower it does not
	// name, a list of feature layers; a text_config nesting another.
	`{"model_type":"acme_vl","vision_feature_layer":[-2,-5],"text_config":{"model_type":"llama","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100,"intermediate_size":128},"vision_config":{"model_type":"acme","hidden_size":32,"intermediate_size":64,"depth":2,"patch_size":8}}`,
	`{"model_type":"llava","text_config":{"model_type":"acme","text_config":{"model_type":"llama"}},"vision_config":{}}`,
	// Small gpt-oss-like MXFP4 experts whose dims the backends pad.
	`{"model_type":"gpt_oss","hidden_size":96,"intermediate_size":80,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":24,"vocab_size":100,"num_local_experts":4,"num_experts_per_tok":2,"sliding_window":8,"quantization_config":{"quant_method":"mxfp4"}}`,
}

// fuzzTestdata are the real configs in testdata the examples do not cover.
var fuzzTestdata = []string{"gemma-3-1b-it-config.json", "llava-1.5-7b-hf-config.json", "mistral-small-3.1-24b-config.json"}

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
	for _, name := range fuzzTestdata {
		data, err := os.ReadFile(filepath.Join("testdata", name))
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
		checkWeightsListing(t, cfg)
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

// checkWeightsListing: for every MXFP4 backend and the checkpoint layout,
// EstimateWeights never panics and fails only with a typed error; its
// engine bytes are at least the checkpoint's, and a listing, where the
// family has one, sums to the checkpoint's bytes.
func checkWeightsListing(t *testing.T, cfg *ModelConfig) {
	for _, opts := range []WeightOptions{{}, {MXFP4Backend: MXFP4FlashInferTRTLLM}, {MXFP4Backend: MXFP4Triton}, {CheckpointLayout: true}} {
		r, err := EstimateWeights(cfg, opts)
		if err != nil {
			if !errors.Is(err, ErrOverflow) && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("untyped weights error %v", err)
			}
			return
		}
		if r.EnginePaddingBytes < 0 || r.Bytes != r.CheckpointBytes+r.EnginePaddingBytes || opts.CheckpointLayout && r.EnginePaddingBytes != 0 {
			t.Fatalf("%+v: %d B, checkpoint %d B, padding %d B", opts, r.Bytes, r.CheckpointBytes, r.EnginePaddingBytes)
		}
		ts, err := CheckpointTensors(cfg, opts)
		if err != nil {
			if !errors.Is(err, ErrNoCheckpointNames) {
				t.Fatalf("untyped listing error %v", err)
			}
			continue
		}
		if sum := listingBytes(t, ts); sum != r.CheckpointBytes {
			t.Fatalf("%+v: listing %d B, checkpoint %d B", opts, sum, r.CheckpointBytes)
		}
	}
}
