package gpuarena_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// A model-based test of the embedder's allocations: random Alloc, Free
// (live, already freed, or under the wrong owner) and FreeOwner calls
// against a small budget, checked after every call against a model of what
// each owner holds; the ledger, the backend and the model agree throughout,
// and Release leaves nothing.
func TestAllocModel(t *testing.T) {
	ctx := context.Background()
	const budget = 8 * mib
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 99))
		m, sim := countingManager(t, 16*mib, gpuarena.WithGPUMemoryUtilization(0.5))
		owners := []string{device.UserOwner, "sampler", "rope"}
		live := map[device.DevicePtr]device.Allocation{}
		var freed []device.Allocation
		held := map[string]int64{}
		total := func() (n int64) {
			for _, b := range held {
				n += b
			}
			return n
		}
		for op := range 300 {
			switch k := rng.IntN(10); {
			case k < 5: // alloc
				owner := owners[rng.IntN(len(owners))]
				n := 1 + rng.Int64N(2*mib)
				a, err := m.Alloc(ctx, "buf", n, gpuarena.WithOwner(owner))
				if total()+n > budget {
					var oom *gpuworker.OutOfMemoryError
					if !errors.As(err, &oom) || !oom.OverBudget || oom.ShortfallBytes != total()+n-budget {
						t.Fatalf("seed %d op %d: alloc of %d B with %d B held: %v; want over budget short by %d", seed, op, n, total(), err, total()+n-budget)
					}
					continue
				}
				if err != nil {
					t.Fatalf("seed %d op %d: alloc of %d B with %d B held: %v", seed, op, n, total(), err)
				}
				live[a.Ptr], held[owner] = a, held[owner]+n
			case k < 8: // free a live one, a freed one, or one under the wrong owner
				switch {
				case len(freed) > 0 && rng.IntN(4) == 0:
					a := freed[rng.IntN(len(freed))]
					if _, again := live[a.Ptr]; again {
						continue // the pointer was reused by a later allocation
					}
					if err := m.Free(ctx, a); !errors.Is(err, gpuarena.ErrNotAllocated) {
						t.Fatalf("seed %d op %d: second free: %v, want ErrNotAllocated", seed, op, err)
					}
				case len(live) > 0:
					var a device.Allocation
					for _, a = range live {
						break
					}
					if rng.IntN(5) == 0 {
						wrong := a
						wrong.Owner = "nobody"
						if err := m.Free(ctx, wrong); !errors.Is(err, gpuworker.ErrNotOwner) {
							t.Fatalf("seed %d op %d: free under another owner: %v, want ErrNotOwner", seed, op, err)
						}
						continue
					}
					if err := m.Free(ctx, a); err != nil {
						t.Fatalf("seed %d op %d: free: %v", seed, op, err)
					}
					delete(live, a.Ptr)
					freed = append(freed, a)
					held[a.Owner] -= a.Bytes
				}
			default: // free an owner
				owner := owners[rng.IntN(len(owners))]
				var n int
				for p, a := range live {
					if a.Owner == owner {
						delete(live, p)
						freed = append(freed, a)
						n++
					}
				}
				r, err := m.FreeOwner(ctx, owner)
				if err != nil || r.Freed != n || r.Bytes != held[owner] {
					t.Fatalf("seed %d op %d: FreeOwner(%s) = %+v, %v; want %d allocations, %d B", seed, op, owner, r, err, n, held[owner])
				}
				held[owner] = 0
			}
			l := mustLedger(t, m)
			got := l.BytesByOwner()
			for _, o := range owners {
				if got[o] != held[o] {
					t.Fatalf("seed %d op %d: the ledger holds %v by owner, the model %v", seed, op, got, held)
				}
			}
			if l.Counters.CurrentBytes != total() || sim.BytesInUse() != total() {
				t.Fatalf("seed %d op %d: ledger %d B, backend %d B, model %d B", seed, op, l.Counters.CurrentBytes, sim.BytesInUse(), total())
			}
		}
		r, err := m.Release(ctx)
		if !errors.Is(err, gpuarena.ErrNoArena) || r.Freed != len(live) || r.Bytes != total() || sim.BytesInUse() != 0 {
			t.Fatalf("seed %d: Release = %+v, %v; want %d allocations (%d B) freed and ErrNoArena", seed, r, err, len(live), total())
		}
	}
}
