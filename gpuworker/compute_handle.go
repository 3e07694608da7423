package gpuworker

import (
	"fmt"
	"time"

	"github.com/gpuarena/gpuarena/device"
)

// The compute half of a forward step's device handle (device.Device):
// launches, copies on the step stream, events. Each checks, as the memory
// half does, that it is called from the step while it runs, on the GPU
// thread, before it reads any of the actor's state.

// onGPUThread reports whether the caller runs on the GPU thread: through
// the backend's own check when it has a cheaper one (threadChecker), else
// the dispatcher's (a gettid system call on Linux).
func (a *gpuActor) onGPUThread() bool {
	if t, ok := a.backend.(threadChecker); ok {
		return t.onGPUThread()
	}
	return a.dispatcher.OnPinnedThread()
}

// live refuses a call after the step or off the GPU thread, then one on a
// fatal worker or a backend without compute; it marks the step as one
// whose end waits for the stream.
func (d *deviceHandle) live(op string) (Compute, error) {
	if d.dead.Load() {
		return nil, fmt.Errorf("%s: %w", op, ErrStepOver)
	}
	if !d.a.onGPUThread() {
		return nil, fmt.Errorf("%s: %w", op, ErrNotGPUThread)
	}
	if d.a.fatal != nil {
		return nil, d.a.fatal
	}
	c := d.a.computeBackend()
	if c == nil {
		return nil, fmt.Errorf("%s: %w: backend %s", op, ErrNoCompute, d.a.backend.Info().Backend)
	}
	d.a.compute.stepUsed = true
	return c, nil
}

// Launch implements device.Device.
func (d *deviceHandle) Launch(fn device.Function, cfg device.LaunchConfig, args ...uint64) error {
	c, err := d.live("launch")
	if err != nil {
		return err
	}
	s, err := d.a.compute.kernel(fn)
	if err != nil {
		return err
	}
	switch {
	case s.params != nil && len(args) != len(s.params):
		return d.launchError(s, fmt.Errorf("%w: %d arguments for %d parameters", ErrLaunchConfig, len(args), len(s.params)))
	case len(args) > MaxLaunchArgs:
		return d.launchError(s, fmt.Errorf("%w: %d arguments, more than %d", ErrLaunchConfig, len(args), MaxLaunchArgs))
	}
	for i, n := range s.params {
		if n > 8 {
			return d.launchError(s, fmt.Errorf("%w: parameter %d is %d B; a launch passes 8-byte words", ErrLaunchConfig, i, n))
		}
	}
	cfg = cfg.Normalized()
	if err := d.a.deviceCall("launch", func() error { return c.Launch(s.kernel, cfg, args, s.params != nil) }); err != nil {
		return d.launchError(s, err)
	}
	return nil
}

func (d *deviceHandle) launchError(s *kernelSlot, err error) error {
	return &device.KernelError{Op: "launch", Module: s.module.entry.Name, Function: s.name, Err: err}
}

// CopyHtoDAsync implements device.Device.
func (d *deviceHandle) CopyHtoDAsync(dst device.DevicePtr, src []byte) error {
	const op = "copy host→device on the step stream"
	c, err := d.live(op)
	if err == nil {
		err = d.check(op, dst, int64(len(src)))
	}
	if err != nil {
		return err
	}
	return d.a.deviceCall(op, func() error { return c.StreamCopyHtoD(dst, src) })
}

// CopyDtoHAsync implements device.Device.
func (d *deviceHandle) CopyDtoHAsync(dst []byte, src device.DevicePtr) error {
	const op = "copy device→host on the step stream"
	c, err := d.live(op)
	if err == nil {
		err = d.check(op, src, int64(len(dst)))
	}
	if err != nil {
		return err
	}
	return d.a.deviceCall(op, func() error { return c.StreamCopyDtoH(dst, src) })
}

// RecordEvent implements device.Device.
func (d *deviceHandle) RecordEvent() (device.Event, error) {
	c, err := d.live("record event")
	if err != nil {
		return device.Event{}, err
	}
	s := &d.a.compute
	if s.stepEvents == MaxStepEvents {
		return device.Event{}, fmt.Errorf("record event: %w: a step records at most %d events", ErrInvalidValue, MaxStepEvents)
	}
	if s.stepEvents == len(s.events) {
		var e EventHandle
		if err := d.a.deviceCall("create event", func() (err error) { e, err = c.NewEvent(); return err }); err != nil {
			return device.Event{}, err
		}
		s.events = append(s.events, e)
	}
	e := s.events[s.stepEvents]
	if err := d.a.deviceCall("record event", func() error { return c.RecordEvent(e) }); err != nil {
		return device.Event{}, err
	}
	s.stepEvents++
	return device.Event{Handle: uint64(s.stepSeq)<<32 | uint64(s.stepEvents-1)}, nil
}

// Elapsed implements device.Device.
func (d *deviceHandle) Elapsed(start, end device.Event) (time.Duration, error) {
	c, err := d.live("elapsed")
	if err != nil {
		return 0, err
	}
	s, err := d.a.compute.event(start)
	if err != nil {
		return 0, fmt.Errorf("elapsed (start): %w", err)
	}
	e, err := d.a.compute.event(end)
	if err != nil {
		return 0, fmt.Errorf("elapsed (end): %w", err)
	}
	var t time.Duration
	err = d.a.deviceCall("elapsed", func() (err error) { t, err = c.EventElapsed(s, e); return err })
	return t, err
}

// Synchronize implements device.Device.
func (d *deviceHandle) Synchronize() error {
	c, err := d.live("synchronize")
	if err != nil {
		return err
	}
	return d.a.deviceCall("synchronize the step stream", c.Synchronize)
}

// LeaveInFlight implements device.Device. Off the GPU thread, or after
// the step, it does nothing.
func (d *deviceHandle) LeaveInFlight() {
	if !d.dead.Load() && d.a.onGPUThread() {
		d.leave = true
	}
}
