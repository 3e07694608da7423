//go:build cuda

package gpuworker_test

import (
	"context"
	"errors"
	"testing"

	"gorgonia.org/cu"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// TestCUDAStepHandles: a step gets the current context and its stream,
// work it queues on the stream with gorgonia.org/cu is done when Forward
// returns, and the handles are refused after the step.
func TestCUDAStepHandles(t *testing.T) {
	ctx := context.Background()
	w := startWith(t, gpuworker.BackendConfig{Kind: gpuworker.KindCUDA}.Factory())
	const n = 1 << 20
	p := mustAlloc(t, w, "raw", n)
	var kept device.Device
	_, err := w.Forward(ctx, func(dev device.Device) error {
		kept = dev
		c, s, err := gpuworker.CUDAStep(dev)
		if err != nil {
			return err
		}
		cur, err := cu.CurrentContext()
		if err != nil || cur != c {
			t.Errorf("the current context is %v (%v), CUDAStep gave %v", cur, err, c)
		}
		return cu.MemsetD8Async(cu.DevicePtr(p), 7, n, s)
	})
	if err != nil {
		t.Fatal(err)
	}
	back, err := w.CopyDtoH(ctx, p, n)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range back {
		if b != 7 {
			t.Fatalf("byte %d is %d after a memset on the step's stream, want 7", i, b)
		}
	}
	if _, _, err := gpuworker.CUDAStep(kept); !errors.Is(err, gpuworker.ErrStepOver) {
		t.Fatalf("CUDAStep after the step: got %v, want ErrStepOver", err)
	}
}
