package arena

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
)

const (
	h200Bytes = 141 << 30 // 151397597184
	h100Bytes = 80 << 30  // 85899345920
)

// checkFitInvariants: the report's numbers agree with each other.
func checkFitInvariants(t testing.TB, r *FitReport) {
	t.Helper()
	own := r.WeightBytes + r.ArenaBytes + r.SlabBytes + r.ReserveBytes
	committed, process, started := r.UsedByOthersBytes+own, max(r.BudgetBytes-r.UsedByOthersBytes, 0), true
	if r.UtilizationScope == UtilizationInstance { // others' memory only has to leave the budget free
		started = r.Device.FreeBytes >= r.BudgetBytes
		committed, process = own, 0
		if started {
			process = r.BudgetBytes
		}
	}
	var startShort int64 // what others must free for vLLM to start
	if !started {
		startShort = r.BudgetBytes - r.Device.FreeBytes
	}
	switch {
	case r.ProcessBudgetBytes != process:
		t.Fatalf("process budget %d B, want %d (budget %d B, others %d B, %s)", r.ProcessBudgetBytes, process, r.BudgetBytes, r.UsedByOthersBytes, r.UtilizationScope)
	case r.Fits != (r.RequiredBytes <= r.BudgetBytes && started),
		r.RequiredBytes != committed+r.SeqBytes,
		r.KVBudgetBytes != max(process-own, 0),
		r.KVBlocks < 0 || r.HeadroomBytes < 0 || r.ShortfallBytes < 0,
		r.Fits && r.HeadroomBytes != r.BudgetBytes-r.RequiredBytes,
		!r.Fits && r.ShortfallBytes != max(r.RequiredBytes-r.BudgetBytes, startShort),
		r.SeqBytes > 0 && r.Fits != (r.MaxConcurrentSeqs >= 1),
		r.StateCacheBytes+r.KVCacheBytes > r.KVBudgetBytes,
		r.KVCacheBytes != r.KVBlocks*r.KVBytesPerBlock,
		r.Fits == (r.Suggestions != nil),
		len(r.Largest) > 3:
		t.Fatalf("inconsistent fit %+v", *r)
	}
	if r.KVBytesPerBlock > 0 && r.MaxConcurrentSeqs > 0 && r.KVBlocks < r.StateSeqs*r.MinKVBlocks {
		t.Fatalf("%d KV blocks cannot hold %d sequences of %d blocks", r.KVBlocks, r.StateSeqs, r.MinKVBlocks)
	}
}

// fitExample plans and fits one example config.
func fitExample(t *testing.T, file string, opts Options, dev DeviceMemory, fo FitOptions) (*Plan, *FitReport) {
	t.Helper()
	cfg, plan := planExample(t, file, opts)
	r, err := Fit(plan, cfg, dev, fo)
	if err != nil {
		t.Fatalf("Fit(%s): %v", file, err)
	}
	checkFitInvariants(t, r)
	return plan, r
}

// fitNumbers is a report's numbers, for comparing with a worked-out want.
type fitNumbers struct {
	Fits                                                            bool
	Budget, Others, Weights, Arena, Reserve, KVBudget               int64
	SeqBytes, FixedPerSeq, MaxSeqs, StateSeqs, StateCache, KVBlocks int64
	KVCache, KVTokens, Required, Headroom, Shortfall                int64
}

func numbers(r *FitReport) fitNumbers {
	return fitNumbers{r.Fits, r.BudgetBytes, r.UsedByOthersBytes, r.WeightBytes, r.ArenaBytes, r.ReserveBytes,
		r.KVBudgetBytes, r.SeqBytes, r.FixedBytesPerSeq, r.MaxConcurrentSeqs, r.StateSeqs, r.StateCacheBytes,
		r.KVBlocks, r.KVCacheBytes, r.KVTokens, r.RequiredBytes, r.HeadroomBytes, r.ShortfallBytes}
}

// TestFitLlamaOnH200: dense, default options, 1 GiB used by others.
func TestFitLlamaOnH200(t *testing.T) {
	dev := DeviceMemory{TotalBytes: h200Bytes, FreeBytes: h200Bytes - 1<<30}
	plan, r := fitExample(t, "llama-3.1-8b.json", Options{}, dev, FitOptions{})
	if plan.BufferBytes != 3_081_336_832 {
		t.Fatalf("plan changed: %d B of buffers", plan.BufferBytes)
	}
	want := fitNumbers{
		Fits:     true,
		Budget:   136_257_837_465, // ⌊0.9 × 151397597184⌋
		Others:   1 << 30,
		Weights:  16_060_522_496,  // 2 B × 8,030,261,248 params
		Arena:    3_081_336_832,   // every buffer a multiple of 256 B: no pool padding
		Reserve:  1 << 30,         // DefaultReserveBytes
		KVBudget: 114_968_494_489, // 136257837465 − (1073741824 + 16060522496 + 3081336832 + 1073741824)
		SeqBytes: 4_294_967_296,   // ⌈32768/16⌉ = 2048 blocks × 2,097,152
		MaxSeqs:  26,              // ⌊114968494489 / 4294967296⌋
		// No sliding or state: the whole KV budget is paged blocks.
		StateSeqs: 26,
		KVBlocks:  54_821,          // ⌊114968494489 / 2097152⌋
		KVCache:   114_967_969_792, // 54821 × 2097152
		KVTokens:  877_136,         // 54821 × 16
		Required:  25_584_310_272,  // 21289342976 + 4294967296
		Headroom:  110_673_527_193, // 136257837465 − 25584310272
	}
	if got := numbers(r); got != want {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	if r.ProcessBudgetBytes != 135_184_095_641 { // 136257837465 − 1073741824
		t.Errorf("process budget %d B, want 135184095641", r.ProcessBudgetBytes)
	}
	wantLargest := []FitItem{{"weights.mlp", "weights", 11_274_289_152}, {"kv.one_sequence", "kv", 4_294_967_296},
		{"weights.attention", "weights", 2_684_354_560}}
	if !equalItems(r.Largest, wantLargest) {
		t.Errorf("largest %+v", r.Largest)
	}
	if r.GPUMemoryUtilization != 0.9 || r.KVBytesPerBlock != 2_097_152 || r.MinKVBlocks != 2048 || r.Weights == nil {
		t.Errorf("%+v", *r)
	}
	for _, n := range []string{"1073741824 B (1.00 GiB) of the device are already in use by others and count against the budget of 136257837465 B, leaving 135184095641 B to this process",
		"reserve: 1073741824 B", "arenactl place", "holds 26 of them"} {
		if !hasNote(r.Notes, n) {
			t.Errorf("no note %q in %q", n, r.Notes)
		}
	}
}

// TestFitGptOssOnH200: mxfp4 experts, sliding-window layers, whole device free.
func TestFitGptOssOnH200(t *testing.T) {
	dev := DeviceMemory{TotalBytes: h200Bytes, FreeBytes: h200Bytes}
	// The weights at checkpoint bytes (TestFitGptOss120bOnH100Marlin fits
	// them as vLLM pads them).
	plan, r := fitExample(t, "gpt-oss-120b.json", Options{}, dev, FitOptions{Weights: WeightOptions{CheckpointLayout: true}})
	if plan.BufferBytes != 4_396_949_120 {
		t.Fatalf("plan changed: %d B of buffers", plan.BufferBytes)
	}
	want := fitNumbers{
		Fits:   true,
		Budget: 136_257_837_465,
		// Experts 60,993,699,840 (TestWeightsQuantized) + 2 × 2,127,557,952 bf16.
		Weights:  65_248_815_744,
		Arena:    4_396_949_248,  // 128 B of pool alignment
		Reserve:  1 << 30,        //
		KVBudget: 65_538_330_649, // 136257837465 − 70719506816
		// 2048 × 589,824 (18 full layers) + 521 × 589,824 (18 sliding,
		// window 128: ⌈(127 + max_batch_tokens 8192)/16⌉ + 1 blocks).
		SeqBytes:    1_515_257_856,
		FixedPerSeq: 307_298_304,    // 521 sliding blocks of 589,824 B
		MaxSeqs:     43,             // ⌊65538330649 / 1515257856⌋
		StateSeqs:   43,             // min(43, max_batch_size 256)
		StateCache:  13_213_827_072, // 43 × 307298304
		KVBlocks:    88_712,         // ⌊(65538330649 − 13213827072) / 589824⌋
		KVCache:     52_324_466_688, // 88712 × 589824
		KVTokens:    1_419_392,      // 88712 × 16
		Required:    72_234_764_672, // 70719506816 + 1515257856
		Headroom:    64_023_072_793, // 136257837465 − 72234764672
	}
	if got := numbers(r); got != want {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	if r.UsedByOthersBytes != 0 || hasNote(r.Notes, "in use by others") || !hasNote(r.Notes, "18 sliding-window layers") {
		t.Errorf("notes %q", r.Notes)
	}
}

// TestFitNemotronNanoOnH100: Mamba-2 state, non-default options.
func TestFitNemotronNanoOnH100(t *testing.T) {
	dev := DeviceMemory{TotalBytes: h100Bytes, FreeBytes: h100Bytes - 2<<30}
	fo := FitOptions{GPUMemoryUtilization: new(0.85), ReserveBytes: new(int64(512 << 20))}
	plan, r := fitExample(t, "nemotron-3-nano-30b-a3b.json", Options{MaxSeqLen: 65536}, dev, fo)
	pool, err := NewPoolLayout(plan)
	if err != nil || r.ArenaBytes != pool.Bytes {
		t.Fatalf("arena %d vs pool %d, %v", r.ArenaBytes, pool.Bytes, err)
	}
	arena := r.ArenaBytes
	// budget ⌊0.85 × 80 GiB⌋ = 68 GiB; weights 2 B × 31,577,940,288 params +
	// 2 more bytes for each of the 23 × 128 f32 e_score_correction_bias.
	const budget, weights = 73_014_444_032, 63_155_886_464
	kvBudget := budget - (2<<30 + weights + arena + 512<<20)
	// 6 attention layers × 2 × 2 × 128 × 2 = 6144 B/token → 4096 blocks of
	// 98,304 B; state 23 × (conv 6144 × 3 × 2 + SSM 64 × 64 × 128 × 4) = 49,082,368.
	const seq, fixed = 4096*98_304 + 49_082_368, 49_082_368
	maxSeqs := kvBudget / seq
	blocks := (kvBudget - maxSeqs*fixed) / 98_304
	want := fitNumbers{
		Fits: true, Budget: budget, Others: 2 << 30, Weights: weights, Arena: arena, Reserve: 512 << 20,
		KVBudget: kvBudget, SeqBytes: seq, FixedPerSeq: fixed, MaxSeqs: maxSeqs, StateSeqs: maxSeqs,
		StateCache: maxSeqs * fixed, KVBlocks: blocks, KVCache: blocks * 98_304, KVTokens: blocks * 16,
		Required: budget - kvBudget + seq, Headroom: kvBudget - seq,
	}
	if got := numbers(r); got != want {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	if maxSeqs != 8 || r.GPUMemoryUtilization != 0.85 {
		t.Errorf("max seqs %d (want 8 for %d B of arena), utilization %g", maxSeqs, arena, r.GPUMemoryUtilization)
	}
}

// TestFitSuggestions: Llama-3.1-8B on a 24 GiB device does not fit; each
// suggestion is the boundary: it fits, and one step further does not.
func TestFitSuggestions(t *testing.T) {
	dev := DeviceMemory{TotalBytes: 24 << 30, FreeBytes: 24 << 30}
	cfg, plan := planExample(t, "llama-3.1-8b.json", Options{})
	r, err := Fit(plan, cfg, dev, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkFitInvariants(t, r)
	// budget ⌊0.9 × 24 GiB⌋ = 23,192,823,398; required = weights
	// 16,060,522,496 + arena 3,081,336,832 + reserve 1 GiB + one sequence
	// 4,294,967,296 = 24,510,568,448.
	if r.Fits || r.ShortfallBytes != 24_510_568_448-23_192_823_398 || r.Suggestions == nil {
		t.Fatalf("%+v", *r)
	}
	s := *r.Suggestions
	fits := func(o Options, util float64) bool {
		p, err := PlanFor(cfg, o)
		if err != nil {
			t.Fatal(err)
		}
		var fo FitOptions
		if util != 0 {
			fo.GPUMemoryUtilization = &util
		}
		fr, err := Fit(p, cfg, dev, fo)
		if err != nil {
			t.Fatal(err)
		}
		return fr.Fits
	}
	m := s.MaxBatchTokens
	if m <= 0 || !fits(Options{MaxBatchTokens: m, MaxBatchSize: min(256, m)}, 0) ||
		fits(Options{MaxBatchTokens: m + 1, MaxBatchSize: min(256, m+1)}, 0) {
		t.Errorf("max_batch_tokens %d is not the boundary", m)
	}
	l := s.MaxSeqLen
	if l <= 0 || !fits(Options{MaxSeqLen: l}, 0) || fits(Options{MaxSeqLen: l + 1}, 0) {
		t.Errorf("max_seq_len %d is not the boundary", l)
	}
	u := s.GPUMemoryUtilization
	if u <= 0.9 || u > 1 || !fits(Options{}, u) || fits(Options{}, u-0.0001) {
		t.Errorf("gpu_memory_utilization %g is not the boundary", u)
	}
	// ⌈24510568448 × 10000 / 25769803776⌉ = 9512. max_seq_len: the budget
	// leaves 23192823398 − 20215601152 = 2,977,222,246 B for the sequence,
	// ⌊/ 2097152⌋ = 1419 blocks of 16 tokens. max_batch_tokens: the arena
	// must shrink to 1,763,591,782 B; the boundary check above pins it.
	if u != 0.9512 || l != 1419*16 || m != 4606 {
		t.Errorf("suggestions %+v, want 4606, 22704, 0.9512", s)
	}
	for _, n := range []string{"does not fit: short by 1317745050 B", "fits with max_batch_tokens", "fits with max_seq_len",
		"fits with gpu_memory_utilization 0.9512 (now 0.9)"} {
		if !hasNote(r.Notes, n) {
			t.Errorf("no note %q in %q", n, r.Notes)
		}
	}
}

// TestFitNoSuggestion: DeepSeek-V4-Flash's 156 GB of weights exceed an
// H200: no option change helps, and the largest items are weights.
func TestFitNoSuggestion(t *testing.T) {
	dev := DeviceMemory{TotalBytes: h200Bytes, FreeBytes: h200Bytes}
	_, r := fitExample(t, "deepseek-v4-flash.json", Options{}, dev, FitOptions{})
	if r.Fits || r.Suggestions == nil || *r.Suggestions != (FitSuggestions{}) || r.KVBudgetBytes != 0 || r.MaxConcurrentSeqs != 0 {
		t.Errorf("%+v", *r)
	}
	if r.Largest[0].Name != "weights.moe_experts" || r.Largest[0].Bytes != 147_169_738_752 {
		t.Errorf("largest %+v", r.Largest)
	}
	if !hasNote(r.Notes, "no smaller max_batch_tokens or max_seq_len") {
		t.Errorf("notes %q", r.Notes)
	}
	// With fp8 projections and an include_mtp the weights are larger still;
	// excluding them (already resident elsewhere) lets the arena fit.
	_, ex := fitExample(t, "deepseek-v4-flash.json", Options{}, dev, FitOptions{ExcludeWeights: true})
	if !ex.Fits || ex.WeightBytes != 0 || ex.Weights.Bytes != r.WeightBytes || !hasNote(ex.Notes, "are excluded") {
		t.Errorf("exclude weights: %+v", *ex)
	}
}

// TestFitQwen3NextFP8: the bf16 weights (159 GB) do not fit an H200; sized
// as fp8 they do, and GDN state is set aside per sequence.
func TestFitQwen3NextFP8(t *testing.T) {
	dev := DeviceMemory{TotalBytes: h200Bytes, FreeBytes: h200Bytes}
	_, bf := fitExample(t, "qwen3-next-80b-a3b-thinking.json", Options{}, dev, FitOptions{})
	_, f8 := fitExample(t, "qwen3-next-80b-a3b-thinking.json", Options{}, dev, FitOptions{Weights: WeightOptions{DType: FP8}})
	if bf.Fits || !f8.Fits || f8.WeightBytes >= bf.WeightBytes*51/100 {
		t.Fatalf("bf16 fits %v (%d B), fp8 fits %v (%d B)", bf.Fits, bf.WeightBytes, f8.Fits, f8.WeightBytes)
	}
	// One sequence: 2048 blocks × 393,216 + 39,518,208 B of GDN state (36
	// layers × (conv 49,152 + SSM 1,048,576 in bf16, vLLM's auto)).
	if f8.SeqBytes != 2048*393_216+39_518_208 || f8.FixedBytesPerSeq != 39_518_208 ||
		f8.StateCacheBytes != f8.StateSeqs*39_518_208 {
		t.Errorf("%+v", *f8)
	}
}

// TestFitReserveAndUtilizationOptions: unset options take their defaults,
// a set 0 reserve reserves nothing, a set utilization is taken as given.
func TestFitReserveAndUtilizationOptions(t *testing.T) {
	dev := DeviceMemory{TotalBytes: h200Bytes, FreeBytes: h200Bytes}
	_, def := fitExample(t, "llama-3.1-8b.json", Options{}, dev, FitOptions{})
	tests := []struct {
		name                    string
		opts                    FitOptions
		wantReserve, wantBudget int64
	}{
		{"unset: 1 GiB reserve, 0.9", FitOptions{}, DefaultReserveBytes, 136_257_837_465},
		{"reserve 0: none", FitOptions{ReserveBytes: new(int64(0))}, 0, 136_257_837_465},
		{"reserve 512 MiB", FitOptions{ReserveBytes: new(int64(512 << 20))}, 512 << 20, 136_257_837_465},
		{"utilization 1", FitOptions{GPUMemoryUtilization: new(1.0)}, DefaultReserveBytes, h200Bytes},
		{"utilization 0.9 set", FitOptions{GPUMemoryUtilization: new(0.9)}, DefaultReserveBytes, 136_257_837_465},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, r := fitExample(t, "llama-3.1-8b.json", Options{}, dev, tt.opts)
			if r.ReserveBytes != tt.wantReserve || r.BudgetBytes != tt.wantBudget ||
				r.KVBudgetBytes-def.KVBudgetBytes != (DefaultReserveBytes-tt.wantReserve)+(tt.wantBudget-def.BudgetBytes) {
				t.Errorf("reserve %d B, budget %d B, kv budget %d B; want reserve %d B, budget %d B",
					r.ReserveBytes, r.BudgetBytes, r.KVBudgetBytes, tt.wantReserve, tt.wantBudget)
			}
		})
	}
}

// TestFitNoBudgetLeft: other processes holding all of the budget make a
// report that does not fit, with the process budget 0 and a note that says
// what to change, not an error.
func TestFitNoBudgetLeft(t *testing.T) {
	// ⌊0.9 × 141 GiB⌋ = 136257837465 B; others hold 136257837466 B.
	dev := DeviceMemory{TotalBytes: h200Bytes, FreeBytes: h200Bytes - 136_257_837_466}
	_, r := fitExample(t, "llama-3.1-8b.json", Options{}, dev, FitOptions{})
	if r.Fits || r.ProcessBudgetBytes != 0 || r.KVBudgetBytes != 0 || r.BudgetBytes != 136_257_837_465 {
		t.Errorf("fits %v, process budget %d B, kv budget %d B, budget %d B; want no fit, 0, 0, 136257837465",
			r.Fits, r.ProcessBudgetBytes, r.KVBudgetBytes, r.BudgetBytes)
	}
	want := "gpu_memory_utilization 0.9 of 151397597184 B is 136257837465 B, but other processes already hold 136257837466 B"
	if !hasNote(r.Notes, want) || !hasNote(r.Notes, "raise gpu_memory_utilization to at least 0.9001") {
		t.Errorf("notes %q: want %q and the utilization to raise to", r.Notes, want)
	}
}

// TestFitWithoutKVLayers: a Mamba-2-only model has state but no blocks.
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
	r, err := Fit(plan, cfg, DeviceMemory{TotalBytes: h200Bytes, FreeBytes: h200Bytes}, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkFitInvariants(t, r)
	// One Mamba-2 layer: conv 10240 × 3 × 2 + SSM 128 × 64 × 128 × 4.
	const state = 10240*3*2 + 128*64*128*4
	if !r.Fits || r.KVBytesPerBlock != 0 || r.KVBlocks != 0 || r.MinKVBlocks != 0 || r.SeqBytes != state ||
		r.MaxConcurrentSeqs != r.KVBudgetBytes/state || r.StateSeqs != 256 {
		t.Errorf("%+v", *r)
	}
	if !hasNote(r.Notes, "no paged KV-cache layers") {
		t.Errorf("notes %q", r.Notes)
	}
}

func TestFitErrors(t *testing.T) {
	cfg, plan := planExample(t, "llama-3.1-8b.json", Options{})
	dev := DeviceMemory{TotalBytes: h200Bytes, FreeBytes: h200Bytes}
	tests := []struct {
		name   string
		dev    DeviceMemory
		opts   FitOptions
		option string
	}{
		{"zero util", dev, FitOptions{GPUMemoryUtilization: new(0.0)}, "gpu_memory_utilization"},
		{"negative util", dev, FitOptions{GPUMemoryUtilization: new(-0.1)}, "gpu_memory_utilization"},
		{"util over 1", dev, FitOptions{GPUMemoryUtilization: new(1.5)}, "gpu_memory_utilization"},
		{"NaN util", dev, FitOptions{GPUMemoryUtilization: new(math.NaN())}, "gpu_memory_utilization"},
		{"negative reserve", dev, FitOptions{ReserveBytes: new(int64(-1))}, "reserve_bytes"},
		{"weight dtype", dev, FitOptions{Weights: WeightOptions{DType: U32}}, "weight_dtype"},
		{"zero total", DeviceMemory{}, FitOptions{}, "total_bytes"},
		{"free over total", DeviceMemory{TotalBytes: 10, FreeBytes: 11}, FitOptions{}, "free_bytes"},
		{"negative free", DeviceMemory{TotalBytes: 10, FreeBytes: -1}, FitOptions{}, "free_bytes"},
	}
	for _, tt := range tests {
		_, err := Fit(plan, cfg, tt.dev, tt.opts)
		if !isOption(err, tt.option) {
			t.Errorf("%s: err = %v, want option %s", tt.name, err, tt.option)
		}
	}
	if _, err := Fit(nil, cfg, dev, FitOptions{}); err == nil || !strings.Contains(err.Error(), "nil *Plan") {
		t.Errorf("nil plan: err = %v", err)
	}
	var ce *ConfigError
	if _, err := Fit(plan, nil, dev, FitOptions{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil cfg: err = %v", err)
	}
	if _, err := Fit(plan, loadExample(t, "qwen3-8b.json"), dev, FitOptions{}); !errors.As(err, &ce) || ce.Field != "model_type" {
		t.Errorf("mismatched cfg: err = %v", err)
	}
	huge := *cfg
	huge.VocabSize = 1 << 62
	if _, err := Fit(plan, &huge, dev, FitOptions{}); !errors.Is(err, ErrOverflow) {
		t.Errorf("huge vocab: err = %v", err)
	}
}

// TestFitReportJSONAndLog: snake_case JSON with [] for empty lists and the
// suggestions only when it does not fit; slog shows the byte counts.
func TestFitReportJSONAndLog(t *testing.T) {
	_, fits := fitExample(t, "llama-3.1-8b.json", Options{}, DeviceMemory{TotalBytes: h200Bytes, FreeBytes: h200Bytes}, FitOptions{})
	_, short := fitExample(t, "llama-3.1-8b.json", Options{}, DeviceMemory{TotalBytes: 24 << 30, FreeBytes: 24 << 30}, FitOptions{})
	for _, r := range []*FitReport{fits, short} {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"fits", "model_type", "budget_bytes", "used_by_others_bytes", "weight_bytes", "weights",
			"arena_bytes", "reserve_bytes", "kv_budget_bytes", "kv", "seq_bytes", "max_concurrent_seqs", "kv_blocks",
			"required_bytes", "largest", "notes"} {
			if _, ok := m[k]; !ok {
				t.Errorf("no key %q", k)
			}
		}
		if _, ok := m["suggestions"]; ok == r.Fits {
			t.Errorf("fits %v, suggestions present %v", r.Fits, ok)
		}
		if dev, _ := m["device"].(map[string]any); dev["total_bytes"] == nil {
			t.Errorf("device %v", m["device"])
		}
	}
	if b, _ := json.Marshal(FitReport{}); !strings.Contains(string(b), `"largest":[]`) || !strings.Contains(string(b), `"notes":[]`) {
		t.Errorf("empty report %s", b)
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("fit", "report", short)
	for _, k := range []string{`"max_concurrent_seqs":0`, `"weight_bytes":16060522496`, `"suggestions":{`} {
		if !strings.Contains(buf.String(), k) {
			t.Errorf("log %s has no %s", buf.String(), k)
		}
	}
}

func TestLowestUtilizationAndSearch(t *testing.T) {
	for _, tt := range []struct {
		required, total int64
		want            float64
	}{
		{9, 10, 0.9}, {1, 3, 0.3334}, {10, 10, 1}, {11, 10, 0}, {math.MaxInt64, math.MaxInt64, 1},
	} {
		if got := lowestUtilization(tt.required, tt.total); got != tt.want {
			t.Errorf("lowestUtilization(%d, %d) = %g, want %g", tt.required, tt.total, got, tt.want)
		}
	}
	if got := largestFitting(1, 100, func(v int64) bool { return v <= 37 }); got != 37 {
		t.Errorf("largestFitting = %d, want 37", got)
	}
	if got := largestFitting(1, 100, func(int64) bool { return false }); got != 0 {
		t.Errorf("largestFitting none = %d", got)
	}
	if got := largestFitting(1, 0, func(int64) bool { return true }); got != 0 {
		t.Errorf("largestFitting empty = %d", got)
	}
}

// equalItems compares two item lists.
func equalItems(a, b []FitItem) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestFitCheckpointWeightBytes: exact bytes from a checkpoint replace the
// estimate in every figure, the estimate stays in the report, and a
// negative value is an *OptionError.
func TestFitCheckpointWeightBytes(t *testing.T) {
	dev := DeviceMemory{TotalBytes: h200Bytes, FreeBytes: h200Bytes}
	_, est := fitExample(t, "llama-3.1-8b.json", Options{}, dev, FitOptions{})
	const delta = 1 << 20 // a checkpoint 1 MiB larger than the estimate
	exact := est.WeightBytes + delta
	_, r := fitExample(t, "llama-3.1-8b.json", Options{}, dev, FitOptions{CheckpointWeightBytes: &exact})
	t.Run("figures", func(t *testing.T) {
		if est.WeightSource != "estimate" || est.EstimatedWeightBytes != 16_060_522_496 || est.CheckpointWeightBytes != 0 {
			t.Errorf("estimate fit: source %q, estimated %d, checkpoint %d", est.WeightSource, est.EstimatedWeightBytes, est.CheckpointWeightBytes)
		}
		if r.WeightSource != "checkpoint" || r.WeightBytes != exact || r.CheckpointWeightBytes != exact || r.EstimatedWeightBytes != est.WeightBytes {
			t.Errorf("checkpoint fit: source %q, weights %d, checkpoint %d, estimated %d; want %d, %d, %d",
				r.WeightSource, r.WeightBytes, r.CheckpointWeightBytes, r.EstimatedWeightBytes, exact, exact, est.WeightBytes)
		}
		if r.RequiredBytes != est.RequiredBytes+delta || r.KVBudgetBytes != est.KVBudgetBytes-delta {
			t.Errorf("required %d, kv budget %d; want %d, %d", r.RequiredBytes, r.KVBudgetBytes, est.RequiredBytes+delta, est.KVBudgetBytes-delta)
		}
		if r.Largest[0].Name != "weights" || r.Largest[0].Bytes != exact {
			t.Errorf("largest[0] = %+v, want weights %d B", r.Largest[0], exact)
		}
	})
	t.Run("negative", func(t *testing.T) {
		cfg, plan := planExample(t, "llama-3.1-8b.json", Options{})
		var oe *OptionError
		if _, err := Fit(plan, cfg, dev, FitOptions{CheckpointWeightBytes: new(int64(-1))}); !errors.As(err, &oe) || oe.Option != "checkpoint_weight_bytes" {
			t.Fatalf("err = %v, want an *OptionError for checkpoint_weight_bytes", err)
		}
	})
}

// TestFitCheckpointPooledTensorBytes: the checkpoint's tensor sizes give the
// tensors and the pooled allocation's padding as two lines that add up to
// what the fit counts; sizes that disagree with CheckpointWeightBytes, or a
// negative one, are *OptionErrors.
func TestFitCheckpointPooledTensorBytes(t *testing.T) {
	dev := DeviceMemory{TotalBytes: h200Bytes, FreeBytes: h200Bytes}
	// 1000 B (pad 24), 0 B (none), 512 B (none), 1 B (pad 255), 257 B (pad 255).
	sizes := []int64{1000, 0, 512, 1, 257}
	const sum, pad = 1770, 24 + 255 + 255
	_, est := fitExample(t, "llama-3.1-8b.json", Options{}, dev, FitOptions{})
	_, r := fitExample(t, "llama-3.1-8b.json", Options{}, dev, FitOptions{CheckpointPooledTensorBytes: sizes})
	if r.WeightSource != "checkpoint" || r.CheckpointWeightBytes != sum || r.WeightPaddingBytes != pad || r.WeightBytes != sum+pad {
		t.Errorf("source %q, tensors %d, padding %d, weights %d; want checkpoint, %d, %d, %d",
			r.WeightSource, r.CheckpointWeightBytes, r.WeightPaddingBytes, r.WeightBytes, sum, pad, sum+pad)
	}
	if want := est.RequiredBytes - est.WeightBytes + sum + pad; r.RequiredBytes != want {
		t.Errorf("required %d B, want %d", r.RequiredBytes, want)
	}
	same := int64(sum)
	if _, r2 := fitExample(t, "llama-3.1-8b.json", Options{}, dev, FitOptions{CheckpointWeightBytes: &same, CheckpointPooledTensorBytes: sizes}); r2.WeightBytes != sum+pad {
		t.Errorf("with agreeing checkpoint_weight_bytes: weights %d, want %d", r2.WeightBytes, sum+pad)
	}
	cfg, plan := planExample(t, "llama-3.1-8b.json", Options{})
	other := int64(sum + 1)
	for _, fo := range []FitOptions{
		{CheckpointWeightBytes: &other, CheckpointPooledTensorBytes: sizes},
		{CheckpointPooledTensorBytes: []int64{5, -1}},
	} {
		var oe *OptionError
		if _, err := Fit(plan, cfg, dev, fo); !errors.As(err, &oe) || oe.Option != "checkpoint_pooled_tensor_bytes" {
			t.Errorf("%+v: err = %v, want an *OptionError for checkpoint_pooled_tensor_bytes", fo, err)
		}
	}
}
