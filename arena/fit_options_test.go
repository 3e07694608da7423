package arena

import "testing"

// TestFitLogitsRowsOn24GiB: Llama-3.1-8B at max_batch_tokens 20,000 on an
// RTX 4090. A logits row per token, [20000, 128256] bf16 = 5.13 GB, leaves
// no room; the fit says so, names the saving and suggests "sampled"; with
// sampled rows, [1024, 128256] = 262,668,288 B, it fits, as vLLM runs it.
func TestFitLogitsRowsOn24GiB(t *testing.T) {
	card, err := LookupDevicePreset("rtx-4090")
	if err != nil {
		t.Fatal(err)
	}
	dev := DeviceMemory{TotalBytes: card.TotalBytes, FreeBytes: card.TotalBytes}
	opts := Options{MaxBatchTokens: 20_000, MaxSeqLen: 8192}
	_, all := fitExample(t, "llama-3.1-8b.json", opts, dev, FitOptions{})
	if all.Fits || all.Suggestions.LogitsRows != LogitsSampled || all.Suggestions.MaxSeqLen != 0 {
		t.Fatalf("all rows: fits %v, suggestions %+v", all.Fits, all.Suggestions)
	}
	// 5,130,240,000 B of 6,985,789,440 B of buffers; sampled saves
	// 5,130,240,000 − 262,668,288 = 4,867,571,712 B.
	for _, n := range []string{"logits: [20000, 128256] bf16 is 5130240000 B", "logits_rows sampled holds [1024, 128256] = 262668288 B",
		"saving 4867571712 B", "fits with logits_rows sampled (now all)"} {
		if !hasNote(all.Notes, n) {
			t.Errorf("no note %q in %q", n, all.Notes)
		}
	}
	opts.LogitsRows = LogitsSampled
	_, sampled := fitExample(t, "llama-3.1-8b.json", opts, dev, FitOptions{})
	if !sampled.Fits || all.ArenaBytes-sampled.ArenaBytes != 4_867_571_712 || sampled.MaxConcurrentSeqs != 2 || hasNote(sampled.Notes, "logits_rows sampled holds") {
		t.Errorf("sampled rows: fits %v, arena %d (all %d), %d sequences, notes %q", sampled.Fits, sampled.ArenaBytes, all.ArenaBytes, sampled.MaxConcurrentSeqs, sampled.Notes)
	}
}

// TestFitSlidingWindowChunkedPrefill: gpt-oss-120b at 16k context on an
// H200. vLLM reserves ⌈(W − 1 + max_batch_tokens)/b⌉ + 1 = 521 sliding
// blocks per sequence, not ⌈W/b⌉ + 1 = 9: one sequence is 1024 + 521 =
// 1545 blocks of 589,824 B instead of 1033, and the device holds 70
// sequences, not 105 (1.5×).
func TestFitSlidingWindowChunkedPrefill(t *testing.T) {
	dev := DeviceMemory{TotalBytes: H200TotalBytes, FreeBytes: H200TotalBytes}
	stored := FitOptions{Weights: WeightOptions{CheckpointLayout: true}} // the weights at checkpoint bytes
	_, r := fitExample(t, "gpt-oss-120b.json", Options{MaxSeqLen: 16384}, dev, stored)
	const block = 589_824
	if r.SeqBytes != 1545*block || r.FixedBytesPerSeq != 521*block || r.MaxConcurrentSeqs != r.KVBudgetBytes/(1545*block) {
		t.Fatalf("seq %d B, fixed %d B, %d sequences", r.SeqBytes, r.FixedBytesPerSeq, r.MaxConcurrentSeqs)
	}
	oldRule := r.KVBudgetBytes / (1033 * block)
	if r.MaxConcurrentSeqs != 70 || oldRule != 105 {
		t.Errorf("%d sequences (the old rule %d), want 70 (105)", r.MaxConcurrentSeqs, oldRule)
	}
	if !hasNote(r.Notes, "= 521 blocks of 589824 B per sequence") {
		t.Errorf("notes %q", r.Notes)
	}
	// A smaller max_batch_tokens reserves less: ⌈(127 + 2048)/16⌉ + 1 = 137.
	_, small := fitExample(t, "gpt-oss-120b.json", Options{MaxSeqLen: 16384, MaxBatchTokens: 2048}, dev, stored)
	if small.FixedBytesPerSeq != 137*block {
		t.Errorf("max_batch_tokens 2048: %d B fixed", small.FixedBytesPerSeq)
	}
}

// TestFitKVCacheDType: fp8 halves the KV bytes per block, so the same
// budget holds twice the blocks.
func TestFitKVCacheDType(t *testing.T) {
	dev := DeviceMemory{TotalBytes: H200TotalBytes, FreeBytes: H200TotalBytes}
	_, bf := fitExample(t, "llama-3.1-8b.json", Options{}, dev, FitOptions{})
	_, f8 := fitExample(t, "llama-3.1-8b.json", Options{KVCacheDType: KVCacheFP8}, dev, FitOptions{})
	if f8.KVBytesPerBlock != bf.KVBytesPerBlock/2 || f8.KVBlocks != bf.KVBudgetBytes/(bf.KVBytesPerBlock/2) || f8.SeqBytes != bf.SeqBytes/2 ||
		!hasNote(f8.Notes, "kv cache in fp8_e4m3, 1 B per element (kv_cache_dtype fp8)") {
		t.Errorf("fp8: %d B/block, %d blocks; bf16 %d, %d; notes %q", f8.KVBytesPerBlock, f8.KVBlocks, bf.KVBytesPerBlock, bf.KVBlocks, f8.Notes)
	}
}

// TestFitSuggestionsStayWithinMaxSeqLenLimit: with allow_long_max_seq_len
// past the model's limit, the suggested max_seq_len is never past it.
func TestFitSuggestionsStayWithinMaxSeqLenLimit(t *testing.T) {
	dev := DeviceMemory{TotalBytes: 80 << 30, FreeBytes: 80 << 30}
	_, r := fitExample(t, "qwen3-8b.json", Options{MaxSeqLen: 1 << 20, AllowLongMaxSeqLen: true}, dev, FitOptions{})
	if r.Fits || r.Suggestions.MaxSeqLen != 40960 {
		t.Errorf("fits %v, suggestions %+v; want max_seq_len 40960, the limit", r.Fits, r.Suggestions)
	}
}

// TestFitUtilizationScope: under "device" (the default) others' memory
// comes out of the budget; under "instance" (vLLM's rule) the budget is
// ⌈u × total⌉ for this process alone, and less free memory than that is
// vLLM's start-up refusal.
func TestFitUtilizationScope(t *testing.T) {
	const total = 100_000_000_007
	dev := DeviceMemory{TotalBytes: total, FreeBytes: total - 5_000_000_000}
	_, d := fitExample(t, "qwen3-8b.json", Options{}, dev, FitOptions{})
	if d.UtilizationScope != UtilizationDevice || d.BudgetBytes != 90_000_000_006 || d.ProcessBudgetBytes != 85_000_000_006 ||
		!hasNote(d.Notes, "utilization_scope device") {
		t.Errorf("device: %s, budget %d, process %d, notes %q", d.UtilizationScope, d.BudgetBytes, d.ProcessBudgetBytes, d.Notes)
	}
	inst := FitOptions{UtilizationScope: UtilizationInstance}
	_, i := fitExample(t, "qwen3-8b.json", Options{}, dev, inst)
	// ⌈0.9 × 100000000007⌉ = 90000000007; 95 GB free passes it.
	committed := i.WeightBytes + i.ArenaBytes + i.SlabBytes + i.ReserveBytes
	if !i.Fits || i.BudgetBytes != 90_000_000_007 || i.ProcessBudgetBytes != 90_000_000_007 || i.KVBudgetBytes != 90_000_000_007-committed ||
		i.RequiredBytes != committed+i.SeqBytes || i.KVBlocks <= d.KVBlocks || !hasNote(i.Notes, "as vLLM counts it (utilization_scope instance)") {
		t.Errorf("instance: %+v", *i)
	}
	// 85 GB free < 90 GB asked: does not fit, short by what others must free.
	busy := DeviceMemory{TotalBytes: total, FreeBytes: 85_000_000_000}
	_, b := fitExample(t, "qwen3-8b.json", Options{}, busy, inst)
	if b.Fits || b.ProcessBudgetBytes != 0 || b.ShortfallBytes != 5_000_000_007 || b.Suggestions == nil ||
		!hasNote(b.Notes, "only 85000000000 B are free") || !hasNote(b.Notes, "lower gpu_memory_utilization to at most 0.8499") {
		t.Fatalf("busy: fits %v, process %d, shortfall %d, suggestions %+v, notes %q", b.Fits, b.ProcessBudgetBytes, b.ShortfallBytes, b.Suggestions, b.Notes)
	}
	// The suggested utilization is the boundary: its budget covers what
	// is required and the free memory passes it; 0.0001 less does not fit.
	u := b.Suggestions.GPUMemoryUtilization
	fitsAt := func(u float64) bool {
		_, r := fitExample(t, "qwen3-8b.json", Options{}, busy, FitOptions{UtilizationScope: UtilizationInstance, GPUMemoryUtilization: &u})
		return r.Fits
	}
	if u <= 0 || u >= 0.85 || !fitsAt(u) || fitsAt(u-0.0001) {
		t.Errorf("suggested utilization %g is not the boundary", u)
	}
	if _, err := Fit(planFor(t, "qwen3-8b.json"), loadExample(t, "qwen3-8b.json"), dev, FitOptions{UtilizationScope: "global"}); !isOption(err, "utilization_scope") {
		t.Errorf("unknown scope: %v", err)
	}
}

// planFor plans an example config under the default options.
func planFor(t *testing.T, file string) *Plan {
	t.Helper()
	_, p := planExample(t, file, Options{})
	return p
}
