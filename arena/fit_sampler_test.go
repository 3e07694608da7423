package arena

import "testing"

// samplerFit fits gpt-oss-20b as vLLM 0.19 ran it on an H100
// (llm-d-planner's FAILED log): 8,192 tokens of context and of batch,
// 1,024 sequences, no speculative tokens, sampled logits, 0.95 of the
// card as the instance's own budget.
func samplerFit(t *testing.T, mode SamplerWarmup, reserve int64) *FitReport {
	t.Helper()
	card, err := LookupDevicePreset("h100-80gb")
	if err != nil {
		t.Fatal(err)
	}
	cfg, plan := planExample(t, "gpt-oss-20b.json", Options{MaxBatchTokens: 8192, MaxSeqLen: 8192, MaxBatchSize: 1024,
		KMax: new(int64(0)), LogitsRows: LogitsSampled})
	r, err := Fit(plan, cfg, DeviceMemory{TotalBytes: card.TotalBytes, FreeBytes: card.TotalBytes},
		FitOptions{GPUMemoryUtilization: new(0.95), UtilizationScope: UtilizationInstance, SamplerWarmup: mode, ReserveBytes: new(reserve)})
	if err != nil {
		t.Fatalf("Fit(%s): %v", mode, err)
	}
	return r
}

// TestFitSamplerWarmup: [1024, 201088] elements, 205,914,112, at 2 + 36 =
// 38 B (vLLM ≤ 0.16, sort) are 7,824,736,256 B, at 2 + 12 = 14 B (vLLM ≥
// 0.17, Triton) 2,882,797,568 B. Inside the budget each adds what the
// arena does not already hold; the reserve moves outside the budget, whose
// 0.05 of the card must hold it (and, from 0.17, the warm-up pass).
func TestFitSamplerWarmup(t *testing.T) {
	const reserve = 1 << 30
	none := samplerFit(t, SamplerWarmupNone, reserve)
	if none.SamplerWarmup != SamplerWarmupNone || none.SamplerPassBytes != 0 || none.OutsideBudgetBytes != 0 || !none.Fits {
		t.Fatalf("none: %+v", none)
	}
	for _, c := range []struct {
		mode     SamplerWarmup
		perElem  int64
		pass     int64
		outsides int64 // what the memory outside the budget must hold
	}{
		{SamplerWarmupProfiled, 38, 7_824_736_256, reserve},
		{SamplerWarmupAfterKVCache, 14, 2_882_797_568, reserve + 2_882_797_568},
	} {
		r := samplerFit(t, c.mode, reserve)
		added := c.pass - r.ArenaBytes
		outside := r.Device.FreeBytes - r.ProcessBudgetBytes
		switch {
		case r.SamplerRows != 1024, r.SamplerBytesPerElement != c.perElem, r.SamplerPassBytes != c.pass:
			t.Errorf("%s: rows %d, %d B per element, pass %d B", c.mode, r.SamplerRows, r.SamplerBytesPerElement, r.SamplerPassBytes)
		case r.SamplerBudgetBytes != added, r.KVBudgetBytes != none.KVBudgetBytes+reserve-added:
			t.Errorf("%s: inside %d B (want %d), KV budget %d B (none %d B)", c.mode, r.SamplerBudgetBytes, added, r.KVBudgetBytes, none.KVBudgetBytes)
		case r.OutsideBudgetBytes != outside, r.Fits != (c.outsides <= outside), !r.Fits:
			t.Errorf("%s: outside %d B (want %d) must hold %d B; fits %v", c.mode, r.OutsideBudgetBytes, outside, c.outsides, r.Fits)
		case !hasNote(r.Notes, "holds them"):
			t.Errorf("%s: notes %q", c.mode, r.Notes)
		}
	}
	// vLLM 0.19's log: the CUDA context (0.51 GiB) and graph pool (1.84
	// GiB) beside the warm-up pass do not fit outside 0.95 of the card.
	const logged = 2_523_293_286
	r := samplerFit(t, SamplerWarmupAfterKVCache, logged)
	if short := logged + r.SamplerPassBytes - r.OutsideBudgetBytes; r.Fits || short <= 0 || r.ShortfallBytes != short ||
		!hasNote(r.Notes, "vLLM runs out of memory after sizing its KV cache") {
		t.Errorf("logged reserve: fits %v, shortfall %d B (want %d), notes %q", r.Fits, r.ShortfallBytes, short, r.Notes)
	}
	if p := samplerFit(t, SamplerWarmupProfiled, logged); !p.Fits || p.KVBudgetBytes != samplerFit(t, SamplerWarmupProfiled, reserve).KVBudgetBytes {
		t.Errorf("profiled, logged reserve: fits %v, KV budget %d B: the reserve outside the budget must not shrink it", p.Fits, p.KVBudgetBytes)
	}
}

// TestParseSamplerWarmup accepts the three values and "" and refuses others.
func TestParseSamplerWarmup(t *testing.T) {
	for in, want := range map[string]SamplerWarmup{"": SamplerWarmupNone, "none": SamplerWarmupNone,
		"profiled": SamplerWarmupProfiled, "after_kv_cache": SamplerWarmupAfterKVCache} {
		if got, err := ParseSamplerWarmup(in); err != nil || got != want {
			t.Errorf("ParseSamplerWarmup(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseSamplerWarmup("vllm"); !isOption(err, "sampler_warmup") {
		t.Errorf("unknown value: %v", err)
	}
	if _, err := Fit(planFor(t, "qwen3-8b.json"), loadExample(t, "qwen3-8b.json"), DeviceMemory{TotalBytes: 1 << 40, FreeBytes: 1 << 40},
		FitOptions{SamplerWarmup: "always"}); !isOption(err, "sampler_warmup") {
		t.Errorf("Fit with an unknown sampler_warmup: %v", err)
	}
}
