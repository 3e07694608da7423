//go:build cuda

package gpuworker_test

import (
	"errors"
	"runtime"
	"testing"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// On a real GPU, a step that calls runtime.Goexit gets ErrStepExited and
// the fresh GPU thread that takes over has the device's primary context
// current (cudaBackend.BindThread): requests and steps after the takeover
// reach the driver, and the bytes written before it read back after it.
func TestCUDAStepGoexitTakeoverBindsTheContext(t *testing.T) {
	w := startWith(t, gpuworker.BackendConfig{Kind: gpuworker.KindCUDA}.Factory())
	ctx := bounded(t)
	p := mustAlloc(t, w, "user", mib)
	if err := w.Memset(ctx, p, 5, mib); err != nil {
		t.Fatal(err)
	}
	_, err := w.Forward(ctx, func(device.Device) error {
		runtime.Goexit()
		return nil
	})
	if !errors.Is(err, gpuworker.ErrStepExited) {
		t.Fatalf("forward of a step that calls runtime.Goexit: %v, want ErrStepExited", err)
	}
	if _, err := w.Forward(ctx, func(d device.Device) error { return d.Memset(p+1, 6, 1) }); err != nil {
		t.Fatalf("a step on the new thread: %v", err)
	}
	got, err := w.CopyDtoH(ctx, p, 2)
	if err != nil || got[0] != 5 || got[1] != 6 {
		t.Fatalf("read back on the new thread: %v, %v; want [5 6]", got, err)
	}
	st, err := w.Stats(ctx)
	if err != nil || st.Takeovers != 1 || len(st.ThreadIDs) != 2 {
		t.Fatalf("stats %+v, %v; want 1 takeover and 2 threads", st, err)
	}
	if err := w.Err(); err != nil {
		t.Fatalf("Err: %v, want nil", err)
	}
}
