package gpuworker_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// BenchmarkGOMAXPROCSChange is one client's forward step and ledger
// snapshot on a worker started at GOMAXPROCS 4, after the process changed
// GOMAXPROCS to procs (runtime.GOMAXPROCS, or the runtime itself following
// a container's CPU limit). The dispatcher reads GOMAXPROCS each time it
// parks, so after a drop to 1 it parks in the scheduler and its callers stop
// polling, as a worker started at 1 would.
//
//	go test ./gpuworker -run '^$' -bench GOMAXPROCSChange -count 6
func BenchmarkGOMAXPROCSChange(b *testing.B) {
	for _, procs := range []int{4, 1} {
		b.Run(fmt.Sprintf("start=4/now=%d", procs), func(b *testing.B) {
			prev := runtime.GOMAXPROCS(4)
			defer runtime.GOMAXPROCS(prev)
			sim, err := gpuworker.NewHostSim(gpuworker.HostSimConfig{})
			if err != nil {
				b.Fatal(err)
			}
			w, err := gpuworker.Start(newSystem(b), func() (gpuworker.Backend, error) { return sim, nil }, gpuworker.WithLogger(quiet))
			if err != nil {
				b.Fatal(err)
			}
			defer w.Stop()
			runtime.GOMAXPROCS(procs)
			ctx := context.Background()
			step := func(device.Device) error { return nil }
			for b.Loop() {
				if _, err := w.Forward(ctx, step); err != nil {
					b.Fatal(err)
				}
				if _, err := w.Ledger(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
