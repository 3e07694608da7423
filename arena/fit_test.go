package arena

import (
	"errors"
	"math"
	"testing"
)

const h200Bytes = 141 << 30 // 151397597184

func TestFitLlamaOnH200(t *testing.T) {
	cfg, plan := planExample(t, "llama-3.1-8b.json", Options{})
	r, err := Fit(plan, cfg, DeviceMemory{TotalBytes: h200Bytes, FreeBytes: h200Bytes - 1<<30}, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	want := FitReport{
		Fits:                 true,
		GPUMemoryUtilization: 0.9,
		Device:               DeviceMemory{TotalBytes: h200Bytes, FreeBytes: h200Bytes - 1<<30},
		BudgetBytes:          136257837465, // ⌊0.9 × 151397597184⌋
		UsedByOthersBytes:    1073741824,   // 1 GiB
		ArenaBytes:           3081336832,
		KVBytesPerBlock:      2097152,      // 16 × 32 layers × 2 × 8 × 128 × 2
		MinKVBlocks:          2048,         // 32768 / 16
		KVBlocks:             62991,        // ⌊(136257837465 − 1073741824 − 3081336832) / 2097152⌋
		KVCacheBytes:         132101701632, // 62991 × 2097152
		KVTokens:             1007856,      // 62991 × 16
		RequiredBytes:        8450045952,   // 1073741824 + 3081336832 + 2048 × 2097152
		HeadroomBytes:        127807791513, // 136257837465 − 8450045952
	}
	got := *r
	got.Largest, got.Notes = nil, nil
	if !fitEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	if len(r.Largest) != 3 || r.Largest[0].ID != Logits {
		t.Errorf("largest %+v", r.Largest)
	}
	if !hasNote(r.Notes, "1073741824 B of the device are already in use by others") {
		t.Errorf("notes %q", r.Notes)
	}
}

// fitEqual compares two reports without their slices.
func fitEqual(a, b FitReport) bool {
	a.Largest, a.Notes, b.Largest, b.Notes = nil, nil, nil, nil
	return a.Fits == b.Fits && a.GPUMemoryUtilization == b.GPUMemoryUtilization && a.Device == b.Device &&
		a.BudgetBytes == b.BudgetBytes && a.UsedByOthersBytes == b.UsedByOthersBytes &&
		a.ArenaBytes == b.ArenaBytes && a.SlabBytes == b.SlabBytes && a.KVBytesPerBlock == b.KVBytesPerBlock &&
		a.MinKVBlocks == b.MinKVBlocks && a.KVBlocks == b.KVBlocks && a.KVCacheBytes == b.KVCacheBytes &&
		a.KVTokens == b.KVTokens && a.RequiredBytes == b.RequiredBytes &&
		a.HeadroomBytes == b.HeadroomBytes && a.ShortfallBytes == b.ShortfallBytes
}

func TestFitDoesNotFit(t *testing.T) {
	cfg, plan := planExample(t, "llama-3.1-8b.json", Options{})
	r, err := Fit(plan, cfg, DeviceMemory{TotalBytes: 8 << 30, FreeBytes: 8 << 30}, 0.6)
	if err != nil {
		t.Fatal(err)
	}
	want := FitReport{
		GPUMemoryUtilization: 0.6,
		Device:               DeviceMemory{TotalBytes: 8 << 30, FreeBytes: 8 << 30},
		BudgetBytes:          5153960755, // ⌊0.6 × 8589934592⌋
		ArenaBytes:           3081336832,
		KVBytesPerBlock:      2097152,
		MinKVBlocks:          2048,
		KVBlocks:             988,        // ⌊(5153960755 − 3081336832) / 2097152⌋
		KVCacheBytes:         2071986176, // 988 × 2097152
		KVTokens:             15808,      // 988 × 16
		RequiredBytes:        7376304128, // 3081336832 + 2048 × 2097152
		ShortfallBytes:       2222343373, // 7376304128 − 5153960755
	}
	if !fitEqual(*r, want) {
		t.Errorf("got  %+v\nwant %+v", *r, want)
	}
	// logits 8192×128256×2; ffn_act_a 8192×14336×2; then ffn_act_q8 and fp8_act
	// tie at 8192×14336 and the earlier BufferID wins.
	ids := []BufferID{Logits, FFNActA, FFNActQ8}
	bytes := []int64{2101346304, 234881024, 117440512}
	for i, b := range r.Largest {
		if b.ID != ids[i] || b.Bytes != bytes[i] {
			t.Errorf("largest[%d] = %v %d, want %v %d", i, b.ID, b.Bytes, ids[i], bytes[i])
		}
	}
	if !hasNote(r.Notes, "does not fit: short by 2222343373 B") {
		t.Errorf("notes %q", r.Notes)
	}
}

func TestFitArenaAloneTooBig(t *testing.T) {
	cfg, plan := planExample(t, "llama-3.1-8b.json", Options{})
	r, err := Fit(plan, cfg, DeviceMemory{TotalBytes: 4 << 30, FreeBytes: 1 << 30}, 1)
	if err != nil {
		t.Fatal(err)
	}
	// budget 4294967296; others 3221225472; required 3221225472 + 3081336832 + 4294967296.
	if r.Fits || r.KVBlocks != 0 || r.KVCacheBytes != 0 || r.RequiredBytes != 10597529600 || r.ShortfallBytes != 6302562304 {
		t.Errorf("%+v", *r)
	}
}

func TestKVBytesPerBlock(t *testing.T) {
	tests := []struct {
		file string
		want int64
	}{
		{"llama-3.1-8b.json", 2097152},               // 16 × 32 × 2 × 8 × 128 × 2
		{"qwen3-next-80b-a3b-thinking.json", 393216}, // 16 × 12 full layers × 2 × 2 × 256 × 2
		{"gpt-oss-20b.json", 393216},                 // 16 × 12 full layers × 2 × 8 × 64 × 2
		{"nemotron-h-8b-base-8k.json", 262144},       // 16 × 4 attention layers × 2 × 8 × 128 × 2
		{"deepseek-v3.json", 1124352},                // MLA: 16 × 61 × (512 + 64) × 2
		// V4 flash: 21 ratio-4 layers × ⌈16/4⌉ × (512 + 128) × 2 = 107520
		//         + 20 ratio-128 layers × ⌈16/128⌉ × 512 × 2 = 20480
		{"deepseek-v4-flash.json", 128000},
	}
	for _, tt := range tests {
		got, err := KVBytesPerBlock(loadExample(t, tt.file), 16)
		if err != nil || got != tt.want {
			t.Errorf("%s: %d, %v; want %d", tt.file, got, err, tt.want)
		}
	}
	if _, err := KVBytesPerBlock(loadExample(t, "llama-3.1-8b.json"), 0); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("kv_block_size 0: err = %v", err)
	}
	if _, err := KVBytesPerBlock(nil, 16); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil cfg: err = %v", err)
	}
}

func TestFitWithoutKVLayers(t *testing.T) {
	cfg, err := ParseConfig(mutate(t, "nemotron-h-8b-base-8k.json", map[string]string{
		"num_hidden_layers": "2", "hybrid_override_pattern": `"M-"`}))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := PlanFor(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Buffers[QKVOutput].Present() || plan.Buffers[SplitKWorkspace].Present() {
		t.Errorf("attention buffers present without attention layers")
	}
	r, err := Fit(plan, cfg, DeviceMemory{TotalBytes: h200Bytes, FreeBytes: h200Bytes}, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Fits || r.KVBytesPerBlock != 0 || r.KVBlocks != 0 || r.MinKVBlocks != 0 || r.RequiredBytes != plan.TotalBytes {
		t.Errorf("%+v", *r)
	}
	if !hasNote(r.Notes, "no KV-cache layers") {
		t.Errorf("notes %q", r.Notes)
	}
}

func TestFitErrors(t *testing.T) {
	cfg, plan := planExample(t, "llama-3.1-8b.json", Options{})
	dev := DeviceMemory{TotalBytes: h200Bytes, FreeBytes: h200Bytes}
	tests := []struct {
		name   string
		dev    DeviceMemory
		util   float64
		option string
	}{
		{"zero util", dev, 0, "gpu_memory_utilization"},
		{"util over 1", dev, 1.5, "gpu_memory_utilization"},
		{"NaN util", dev, math.NaN(), "gpu_memory_utilization"},
		{"zero total", DeviceMemory{}, 0.9, "total_bytes"},
		{"free over total", DeviceMemory{TotalBytes: 10, FreeBytes: 11}, 0.9, "free_bytes"},
		{"negative free", DeviceMemory{TotalBytes: 10, FreeBytes: -1}, 0.9, "free_bytes"},
	}
	for _, tt := range tests {
		_, err := Fit(plan, cfg, tt.dev, tt.util)
		var oe *OptionError
		if !errors.Is(err, ErrInvalidOption) || !errors.As(err, &oe) || oe.Option != tt.option {
			t.Errorf("%s: err = %v, want option %s", tt.name, err, tt.option)
		}
	}
	if _, err := Fit(nil, cfg, dev, 0.9); err == nil {
		t.Error("nil plan: no error")
	}
	var ce *ConfigError
	if _, err := Fit(plan, nil, dev, 0.9); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil cfg: err = %v", err)
	}
	if _, err := Fit(plan, loadExample(t, "qwen3-8b.json"), dev, 0.9); !errors.As(err, &ce) || ce.Field != "model_type" {
		t.Errorf("mismatched cfg: err = %v", err)
	}
}

func TestBudgetIsExactDecimal(t *testing.T) {
	// float64: 0.29 × 100 = 28.999999999999996; the budget reads 0.29 as 29/100.
	if got := budget(0.29, 100); got != 29 {
		t.Errorf("budget(0.29, 100) = %d, want 29", got)
	}
	if got := budget(1, math.MaxInt64); got != math.MaxInt64 {
		t.Errorf("budget(1, MaxInt64) = %d", got)
	}
	if got := budget(0.9, 10); got != 9 {
		t.Errorf("budget(0.9, 10) = %d, want 9", got)
	}
}
