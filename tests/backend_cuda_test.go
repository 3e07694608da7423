//go:build cuda

package tests

import (
	"context"
	"testing"

	"github.com/gpuarena/gpuarena/gpuworker"
)

// testBackend is CUDA device 0 in a -tags cuda build (see
// backend_hostsim_test.go). What the device holds is read as total − free
// memory through a worker of its own, against a baseline taken here: each
// reading retains and releases the primary context, so its own overhead is
// in both. The driver rounds allocations to 2 MiB pages, hence the slack.
func testBackend(t testing.TB) testDevice {
	factory := gpuworker.BackendConfig{Kind: gpuworker.KindCUDA}.Factory()
	used := func() int64 {
		w, err := gpuworker.Start(newSystem(t), factory, gpuworker.WithLogger(discard))
		if err != nil {
			t.Fatalf("open CUDA device 0: %v", err)
		}
		defer w.Stop()
		free, total, err := w.MemInfo(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return total - free
	}
	base := used()
	return testDevice{name: "cuda", factory: factory, bytesInUse: func() int64 { return used() - base }, slack: 2 << 20}
}
