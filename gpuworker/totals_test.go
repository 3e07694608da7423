package gpuworker_test

import (
	"context"
	"testing"

	"github.com/gpuarena/gpuarena/gpuworker"
)

// A caller that has its answer finds the ledger as its request left it in
// LedgerTotals: the GPU thread publishes the totals before it replies, so a
// scrape right after an allocation or a free never reads the ledger from
// before it.
func TestLedgerTotalsBeforeTheReply(t *testing.T) {
	w, _ := startSim(t, gpuworker.HostSimConfig{})
	ctx := context.Background()
	for i := range 2000 {
		p, err := w.Alloc(ctx, "user", "x", 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if got := w.LedgerTotals(); got.Counters.CurrentBytes != 1<<20 || got.Owners["user"].CurrentBytes != 1<<20 {
			t.Fatalf("round %d: after Alloc returned, the totals hold %d B (user %d B), want 1 MiB", i, got.Counters.CurrentBytes, got.Owners["user"].CurrentBytes)
		}
		if err := w.Free(ctx, "user", p); err != nil {
			t.Fatal(err)
		}
		if got := w.LedgerTotals(); got.Counters.CurrentBytes != 0 {
			t.Fatalf("round %d: after Free returned, the totals hold %d B, want 0", i, got.Counters.CurrentBytes)
		}
	}
}
