//go:build cuda

package gpuworker_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/kernels"
)

// TestCUDAGraphCaptureRefusesRawHandles: the raw handles are refused
// inside a capture (their work would bypass the graph), and the capture
// goes on: the graph holds the launch after the refusal, and a replay
// runs it.
func TestCUDAGraphCaptureRefusesRawHandles(t *testing.T) {
	ctx := context.Background()
	w := startWith(t, gpuworker.BackendConfig{Kind: gpuworker.KindCUDA}.Factory(), gpuworker.WithoutBudget())
	add := mustFunction(t, mustLoad(t, w, kernels.ModuleName, kernels.PTX), kernels.ResidualAdd)
	const n = 4096
	p := mustAlloc(t, w, "graph", 2*n)
	ones := make([]uint16, n)
	for i := range ones {
		ones[i] = kernels.F32ToBF16(1)
	}
	if err := w.CopyHtoD(ctx, p, bf16Bytes(ones)); err != nil {
		t.Fatal(err)
	}
	cfg, args := kernels.ResidualAddLaunch(p, p, p, n)
	var refused error
	g, err := w.CaptureGraph(ctx, "raw", func(dev device.Device) error {
		_, _, refused = gpuworker.CUDAStep(dev)
		return dev.Launch(add, cfg, args...)
	})
	if !errors.Is(refused, gpuworker.ErrNotCapturable) {
		t.Errorf("CUDAStep in a capture: got %v, want ErrNotCapturable", refused)
	}
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := w.Forward(ctx, func(dev device.Device) error { return dev.LaunchGraph(g) }); err != nil {
			t.Fatal(err)
		}
	}
	for i, h := range bf16Values(mustRead(t, w, p, 2*n)) {
		if kernels.BF16ToF32(h) != 4 {
			t.Fatalf("element %d is %v after two replays of one doubling of 1, want 4", i, kernels.BF16ToF32(h))
		}
	}
}
