package gpuworker

import (
	"fmt"
	"sync/atomic"

	"github.com/gpuarena/gpuarena/device"
)

// deviceHandle implements device.Device on the GPU thread: it checks that
// it is called there, while its step runs, and every range against the
// ledger, before the backend sees anything.
type deviceHandle struct {
	a *gpuActor
	// dead is set on the GPU thread when the step returns; a goroutine the
	// step started may read it at any time.
	dead atomic.Bool
	// leave: the step called LeaveInFlight (GPU thread only).
	leave bool
}

// device is the handle of one forward step; it dies when the step returns.
// Memset and copy requests use the actor's own handle, a.ops, which never dies.
func (a *gpuActor) device() *deviceHandle { return &deviceHandle{a: a} }

func (d *deviceHandle) invalidate() { d.dead.Store(true) }

// check refuses a call after the step, or off the GPU thread, before it
// reads any of the actor's state (which only the GPU thread may touch), then
// checks the range against the ledger.
func (d *deviceHandle) check(op string, ptr device.DevicePtr, n int64) error {
	if d.dead.Load() {
		return fmt.Errorf("%s: %w", op, ErrStepOver)
	}
	if !d.a.onGPUThread() {
		return fmt.Errorf("%s: %w", op, ErrNotGPUThread)
	}
	if d.a.fatal != nil {
		return d.a.fatal
	}
	if err := d.a.ledger.checkRange(ptr, n); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// Memset implements device.Device.
func (d *deviceHandle) Memset(ptr device.DevicePtr, value byte, bytes int64) error {
	if err := d.check("memset", ptr, bytes); err != nil {
		return err
	}
	return d.a.deviceCall("memset", func() error { return d.a.backend.Memset(ptr, value, bytes) })
}

// CopyHtoD implements device.Device.
func (d *deviceHandle) CopyHtoD(dst device.DevicePtr, src []byte) error {
	if err := d.check("copy host→device", dst, int64(len(src))); err != nil {
		return err
	}
	return d.a.deviceCall("copy host→device", func() error { return d.a.backend.CopyHtoD(dst, src) })
}

// CopyDtoH implements device.Device.
func (d *deviceHandle) CopyDtoH(dst []byte, src device.DevicePtr) error {
	if err := d.check("copy device→host", src, int64(len(dst))); err != nil {
		return err
	}
	return d.a.deviceCall("copy device→host", func() error { return d.a.backend.CopyDtoH(dst, src) })
}

// CopyDtoD implements device.Device.
func (d *deviceHandle) CopyDtoD(dst, src device.DevicePtr, bytes int64) error {
	if err := d.check("copy device→device (source)", src, bytes); err != nil {
		return err
	}
	if err := d.check("copy device→device (destination)", dst, bytes); err != nil {
		return err
	}
	if src < dst+device.DevicePtr(bytes) && dst < src+device.DevicePtr(bytes) {
		return fmt.Errorf("copy device→device of %d B from %#x to %#x: %w: the ranges overlap, and cuMemcpyDtoD's result is undefined for overlapping ranges; copy through a scratch buffer",
			bytes, uint64(src), uint64(dst), ErrInvalidValue)
	}
	return d.a.deviceCall("copy device→device", func() error { return d.a.backend.CopyDtoD(dst, src, bytes) })
}
