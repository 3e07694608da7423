package arena

import (
	"errors"
	"strings"
	"testing"
)

// TestOptionRanges: nonsense values are refused with the accepted range;
// the largest accepted values plan.
func TestOptionRanges(t *testing.T) {
	cfg := loadExample(t, "llama-3.1-8b.json")
	for _, tt := range []struct {
		opts           Options
		option, reason string
	}{
		{Options{KVBlockSize: 100_000_000}, "kv_block_size", "must be in [0, 2048]"},
		{Options{LoRAMaxRank: 100_000_000}, "lora_max_rank", "must be in [0, 512]"},
		{Options{KMax: new(int64(100_000))}, "k_max", "must be in [0, 64]"},
		{Options{KMax: new(int64(-1))}, "k_max", "must be in [0, 64]"},
		{Options{LogitsRows: "some"}, "logits_rows", `want "all" or "sampled"`},
		{Options{KVCacheDType: "int4"}, "kv_cache_dtype", "want one of auto, bfloat16"},
		{Options{MambaSSMCacheDType: "fp8"}, "mamba_ssm_cache_dtype", "want one of auto, float32"},
	} {
		_, err := PlanFor(cfg, tt.opts)
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Option != tt.option || !strings.Contains(oe.Reason, tt.reason) {
			t.Errorf("PlanFor(%+v) = %v; want an *OptionError for %s saying %q", tt.opts, err, tt.option, tt.reason)
		}
	}
	p, err := PlanFor(cfg, Options{KVBlockSize: MaxKVBlockSize, LoRAMaxRank: MaxLoRAMaxRank, KMax: new(int64(MaxKMax)),
		LogitsRows: LogitsSampled, KVCacheDType: "FP8", MambaSSMCacheDType: "fp32"})
	if err != nil {
		t.Fatal(err)
	}
	if o := p.Options; o.KVCacheDType != KVCacheFP8 || o.MambaSSMCacheDType != SSMCacheFloat32 || o.LogitsRows != LogitsSampled {
		t.Errorf("resolved %+v", o)
	}
}

// TestMaxSeqLenLimit: max_seq_len above the model's limit (vLLM's
// _get_and_verify_max_len) is refused unless allowed; rope scaling moves
// the limit as vLLM moves it.
func TestMaxSeqLenLimit(t *testing.T) {
	llama := loadExample(t, "llama-3.1-8b.json")
	_, err := PlanFor(llama, Options{MaxSeqLen: 131073})
	var me *MaxSeqLenError
	if !errors.As(err, &me) || !errors.Is(err, ErrMaxSeqLenPastLimit) || !errors.Is(err, ErrInvalidOption) ||
		me.Limit != 131072 || me.LimitSource != "max_position_embeddings 131072" || !strings.Contains(err.Error(), "at most 131072") {
		t.Fatalf("max_seq_len 131073: %v", err)
	}
	if _, err := PlanFor(llama, Options{MaxSeqLen: 131072}); err != nil {
		t.Errorf("max_seq_len at the limit: %v", err)
	}
	if p, err := PlanFor(llama, Options{MaxSeqLen: 262144, AllowLongMaxSeqLen: true}); err != nil || p.Options.MaxSeqLen != 262144 {
		t.Errorf("allowed: %v", err)
	}
	for _, tt := range []struct {
		name, rope string
		want       int64
		source     string
	}{
		{"yarn extends the original", `{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}`, 131072,
			"rope_scaling yarn: original_max_position_embeddings 32768 × rope_scaling factor 4"},
		{"the older type key", `{"type": "yarn", "factor": 2, "original_max_position_embeddings": 40960}`, 81920, ""},
		{"linear scales max_position_embeddings", `{"rope_type": "linear", "factor": 2.0}`, 81920, "max_position_embeddings 40960 × rope_scaling factor 2"},
		{"llama3 is already extended", `{"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}`, 40960, "max_position_embeddings 40960"},
		{"su reads as longrope", `{"type": "su", "factor": 4.0}`, 40960, ""},
		{"mrope has no factor", `{"type": "mrope", "mrope_section": [16, 24, 24]}`, 40960, ""},
		{"nested per layer type", `{"full_attention": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}, "sliding_attention": {"rope_type": "default"}}`, 131072, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseConfig(mutate(t, "qwen3-8b.json", map[string]string{"rope_scaling": tt.rope}))
			if err != nil {
				t.Fatal(err)
			}
			limit, source := cfg.MaxSeqLenLimit()
			if limit != tt.want || (tt.source != "" && source != tt.source) {
				t.Errorf("limit %d (%s), want %d (%s)", limit, source, tt.want, tt.source)
			}
			if _, err := PlanFor(cfg, Options{MaxSeqLen: tt.want + 1}); !errors.Is(err, ErrMaxSeqLenPastLimit) {
				t.Errorf("past the limit: %v", err)
			}
		})
	}
	// transformers v5 names it rope_parameters.
	v5, err := ParseConfig(mutate(t, "qwen3-8b.json", map[string]string{"rope_parameters": `{"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0, "original_max_position_embeddings": 32768}`}))
	if err != nil {
		t.Fatal(err)
	}
	if limit, _ := v5.MaxSeqLenLimit(); limit != 131072 {
		t.Errorf("rope_parameters: limit %d", limit)
	}
	// vLLM takes Gemma-3's max_position_embeddings as already scaled.
	gemma := &ModelConfig{ModelType: "gemma3_text", MaxPositionEmbeddings: 131072, RopeScaling: []RopeScaling{{Type: "linear", Factor: 8}}}
	if limit, _ := gemma.MaxSeqLenLimit(); limit != 131072 {
		t.Errorf("gemma3: limit %d", limit)
	}
	if limit, source := (&ModelConfig{}).MaxSeqLenLimit(); limit != 0 || source != "" {
		t.Errorf("no max_position_embeddings: %d %q", limit, source)
	}
	for _, bad := range []string{`{"rope_type": "yarn", "factor": -1}`, `{"rope_type": "linear", "factor": "big"}`, `[1, 2]`} {
		if _, err := ParseConfig(mutate(t, "qwen3-8b.json", map[string]string{"rope_scaling": bad})); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("rope_scaling %s: %v", bad, err)
		}
	}
}

// TestLogitsRows: "sampled" holds min(M, max_batch_size·(1 + k_max)) rows.
func TestLogitsRows(t *testing.T) {
	for _, tt := range []struct {
		opts Options
		rows int64
	}{
		{Options{}, 8192},                          // all: M
		{Options{LogitsRows: LogitsSampled}, 1024}, // 256 × (1 + 3)
		{Options{LogitsRows: LogitsSampled, KMax: new(int64(0))}, 256},
		{Options{LogitsRows: LogitsSampled, MaxBatchTokens: 512}, 512}, // 256 × 4 > M
		{Options{LogitsRows: LogitsSampled, MaxBatchSize: 8}, 32},
	} {
		_, p := planExample(t, "llama-3.1-8b.json", tt.opts)
		if b := p.Buffers[Logits]; len(b.Shape) != 2 || b.Shape[0] != tt.rows || b.Shape[1] != 128256 || b.Bytes != tt.rows*128256*2 {
			t.Errorf("%+v: logits %+v, want [%d, 128256]", tt.opts, b, tt.rows)
		}
	}
}

// FuzzOptions: any serving options plan and fit without a panic, and every
// refusal is an *OptionError or a *MaxSeqLenError (or an overflow).
func FuzzOptions(f *testing.F) {
	f.Add(int64(8192), int64(0), int64(16), int64(0), int64(3), int64(0), "all", "auto", "auto", false)
	f.Add(int64(20000), int64(8192), int64(100_000_000), int64(256), int64(100_000), int64(100_000_000), "sampled", "fp8", "float32", true)
	f.Add(int64(1), int64(1<<40), int64(1), int64(1), int64(0), int64(512), "sampled", "bf16", "bf16", true)
	cfgs := []*ModelConfig{loadExample(f, "gpt-oss-20b.json"), loadExample(f, "qwen3-next-80b-a3b-thinking.json")}
	f.Fuzz(func(t *testing.T, m, l, b, bs, k, rank int64, rows, kv, ssm string, long bool) {
		for _, cfg := range cfgs {
			o := Options{MaxBatchTokens: m % (1 << 20), MaxSeqLen: l, KVBlockSize: b, MaxBatchSize: bs, KMax: &k, LoRAMaxRank: rank,
				LogitsRows: LogitsRows(rows), KVCacheDType: KVCacheDType(kv), MambaSSMCacheDType: SSMCacheDType(ssm), AllowLongMaxSeqLen: long}
			p, err := PlanFor(cfg, o)
			var me *MaxSeqLenError
			if err != nil {
				if !errors.Is(err, ErrInvalidOption) && !errors.Is(err, ErrOverflow) && !errors.As(err, &me) {
					t.Fatalf("PlanFor(%+v): untyped error %v", o, err)
				}
				continue
			}
			if _, err := Fit(p, cfg, DeviceMemory{TotalBytes: H200TotalBytes, FreeBytes: H200TotalBytes}, FitOptions{}); err != nil &&
				!errors.Is(err, ErrOverflow) {
				t.Fatalf("Fit(%+v): %v", p.Options, err)
			}
		}
	})
}
