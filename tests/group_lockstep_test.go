package tests

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/gpuarena/gpuarena/device"
)

// Steps in lockstep: 64 goroutines each run group steps; every rank ran
// the same steps in the same order, and no rank started a step while any
// rank still ran another.
func TestGroupLockstepOrder(t *testing.T) {
	const ranks, callers, steps = 4, 64, 4
	g, _ := openGroup(t, ranks)
	defer g.Close()
	ctx := context.Background()
	order := make([][]int, ranks) // rank r's steps, appended on r's GPU thread only
	var mu sync.Mutex
	running := map[int]int{} // step → ranks running it
	overlaps := 0
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for s := range steps {
				id := c*steps + s
				if _, err := g.Forward(ctx, func(rank int, _ *device.Arena, _ device.Device) error {
					mu.Lock()
					for other, n := range running {
						if other != id && n > 0 {
							overlaps++
						}
					}
					running[id]++
					mu.Unlock()
					order[rank] = append(order[rank], id)
					mu.Lock()
					running[id]--
					mu.Unlock()
					return nil
				}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if overlaps != 0 {
		t.Fatalf("%d times a rank ran a step while another rank ran a different one", overlaps)
	}
	if len(order[0]) != callers*steps {
		t.Fatalf("rank 0 ran %d steps, want %d", len(order[0]), callers*steps)
	}
	for r := 1; r < ranks; r++ {
		if !slices.Equal(order[r], order[0]) {
			t.Fatalf("rank %d ran the steps in another order than rank 0", r)
		}
	}
}
