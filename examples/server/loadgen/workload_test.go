package loadgen

import (
	"testing"
	"time"
)

// The same seed draws the same requests, inside the mix's ranges, with
// the shared fraction behind shared prefixes.
func TestWorkloadSeededWithinMix(t *testing.T) {
	a, b := workload(DefaultMix, 400, 9), workload(DefaultMix, 400, 9)
	prefixes := workload(DefaultMix, 400, 10)
	shared := map[string]int{}
	for i, r := range a {
		if r != b[i] {
			t.Fatalf("request %d: %+v then %+v for one seed", i, r, b[i])
		}
		if n := len(r.prompt); n < DefaultMix.PromptTokens[0] || n > DefaultMix.PromptTokens[1] {
			t.Errorf("request %d: %d prompt tokens", i, n)
		}
		if r.maxTokens < DefaultMix.OutputTokens[0] || r.maxTokens > DefaultMix.OutputTokens[1] {
			t.Errorf("request %d: max_tokens %d", i, r.maxTokens)
		}
		shared[r.prompt[:DefaultMix.PrefixTokens]]++
	}
	top := 0
	for _, n := range shared {
		if n > 20 {
			top += n
		}
	}
	if top < 150 || top > 250 || a[0] == prefixes[0] {
		t.Errorf("%d of 400 requests behind a shared prefix, want about 200; seeds 9 and 10 start %q and %q", top, a[0].prompt[:16], prefixes[0].prompt[:16])
	}
}

func TestPercentilesNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	if p := percentiles(d); p.P50 != 50*time.Millisecond || p.P99 != 99*time.Millisecond || p.Samples != 100 {
		t.Errorf("percentiles %+v, want 50 ms, 99 ms of 100", p)
	}
	if p := percentiles(nil); p != (Percentiles{}) {
		t.Errorf("no samples: %+v", p)
	}
}
