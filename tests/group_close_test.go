package tests

import (
	"context"
	"errors"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/internal/testkit"
)

// Close under load with 8 devices: 64 goroutines run group steps and
// per-rank allocations when two Closes start; every request completes or
// gets ErrClosed (ErrReleased for a step after Close's release), both
// Closes return nil, and no device byte and no goroutine is left.
func TestGroupCloseUnderLoad(t *testing.T) {
	defer goleak.VerifyNone(t)
	const ranks, clients = 8, 64
	g, mach := openGroup(t, ranks)
	ctx := context.Background()
	var started, done sync.WaitGroup
	started.Add(clients)
	var mu sync.Mutex
	unexpected := []error{}
	note := func(err error) {
		if err == nil || errors.Is(err, gpuarena.ErrClosed) || errors.Is(err, gpuarena.ErrReleased) {
			return
		}
		mu.Lock()
		unexpected = append(unexpected, err)
		mu.Unlock()
	}
	for c := range clients {
		done.Go(func() {
			for i := 0; ; i++ {
				_, err := g.Forward(ctx, func(_ int, a *device.Arena, dev device.Device) error {
					return dev.Memset(a.Ptr(arena.HiddenStates), byte(c), 4)
				})
				note(err)
				_, aerr := g.Rank(c%ranks).Alloc(ctx, "client", testkit.MiB)
				note(aerr)
				if i == 0 {
					started.Done()
				}
				if errors.Is(err, gpuarena.ErrClosed) && errors.Is(aerr, gpuarena.ErrClosed) {
					return
				}
			}
		})
	}
	started.Wait()
	closeErrs := make(chan error, 2)
	for range 2 {
		go func() { closeErrs <- g.Close() }()
	}
	for range 2 {
		if err := <-closeErrs; err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	done.Wait()
	for _, err := range unexpected[:min(len(unexpected), 5)] {
		t.Errorf("unexpected: %v", err)
	}
	for d := range ranks {
		if n := mach.Device(d).BytesInUse(); n != 0 {
			t.Errorf("device %d holds %d B after Close", d, n)
		}
	}
}
