//go:build cuda

package gpuworker

import (
	"fmt"

	"gorgonia.org/cu"

	"github.com/gpuarena/gpuarena/device"
)

// CUDAStep returns the raw handles of a forward step on the cuda backend:
// the device's primary context, current on the GPU thread, and the step's
// stream, so the step can call gorgonia.org/cu (cuBLAS through it, its
// own modules) where Device has no wrapper. Call it from the step, on its
// goroutine, while it runs. Work the step puts on the stream is ordered
// with its launches and copies; work it puts on other streams of its own
// is waited for too: after CUDAStep, the step's end waits for the whole
// context (cuCtxSynchronize), not only the stream.
//
// The caller must not: make another context current, or pop or destroy
// this one (cuCtxSetCurrent, cuCtxPopCurrent, cuCtxDestroy,
// cuDevicePrimaryCtxReset); destroy the stream or synchronise it from
// another thread; keep either handle, or anything made with them, past the
// step's end, or use them from another goroutine (every driver call must
// run on the GPU thread); allocate or free device memory that the ledger
// should count (use Manager.Alloc before the step); leave device memory
// it allocated itself behind (the manager cannot see it, and Close does
// not free it).
//
// Errors: ErrNotCapturable inside a graph's capture (Worker.CaptureGraph),
// ErrStepOver after the step, ErrNotGPUThread off its goroutine,
// the worker's fatal error, ErrInvalidValue when dev is not a step's
// Device of the cuda backend itself (a backend wrapped by WithFaults
// hides it), and the driver's when the stream cannot be made.
func CUDAStep(dev device.Device) (cu.CUContext, cu.Stream, error) {
	if h, ok := dev.(*captureHandle); ok {
		return cu.CUContext{}, cu.Stream{}, h.refuse("cuda step handles", "a graph holds the launches made through the Device only")
	}
	d, ok := dev.(*deviceHandle)
	if !ok || d == d.a.ops {
		return cu.CUContext{}, cu.Stream{}, fmt.Errorf("cuda step handles: %w: not the Device of a forward step", ErrInvalidValue)
	}
	if _, err := d.live("cuda step handles"); err != nil {
		return cu.CUContext{}, cu.Stream{}, err
	}
	b, ok := d.a.backend.(*cudaBackend)
	if !ok {
		return cu.CUContext{}, cu.Stream{}, fmt.Errorf("cuda step handles: %w: the backend is %T, not the cuda backend itself", ErrInvalidValue, d.a.backend)
	}
	if err := d.a.deviceCall("cuda step handles", b.stepStream); err != nil {
		return cu.CUContext{}, cu.Stream{}, err
	}
	b.compute.raw = true
	return b.ctx, b.compute.stream, nil
}
