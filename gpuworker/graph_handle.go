package gpuworker

import (
	"fmt"
	"time"

	"github.com/gpuarena/gpuarena/device"
)

// captureHandle is the device.Device a graph's capture function gets: its
// launches go to the step handle's Launch (every check of a step's, then
// the backend, whose stream is in capture mode) and are counted; every
// other call is refused with ErrNotCapturable before it reaches the
// backend, so the capture goes on.
type captureHandle struct {
	d *deviceHandle
	// launches is how many launches were captured; modules the modules of
	// their kernels, each once; failed the first launch's error, which
	// fails the capture even when the function goes on.
	launches int
	modules  []*loadedModule
	failed   error
}

var _ device.Device = (*captureHandle)(nil)

// refuse is the error of a call a graph cannot hold: ErrStepOver after
// the capture, else ErrNotCapturable naming the call and why.
func (h *captureHandle) refuse(call, why string) error {
	if h.d.dead.Load() {
		return fmt.Errorf("%s: %w", call, ErrStepOver)
	}
	return fmt.Errorf("%s during a graph capture: %w: %s", call, ErrNotCapturable, why)
}

const (
	whySync   = "it runs on the legacy default stream and waits for it; make it in the step that replays the graph, before or after LaunchGraph"
	whyGoMem  = "a replay would touch that Go memory again long after the call returned; copy in the step that replays the graph"
	whyEvents = "a capture runs nothing, so there is nothing to time or wait for; time the replay in the step"
)

// Launch implements device.Device: the launch is captured.
func (h *captureHandle) Launch(fn device.Function, cfg device.LaunchConfig, args ...uint64) error {
	if err := h.d.Launch(fn, cfg, args...); err != nil {
		if h.failed == nil {
			h.failed = err
		}
		return err
	}
	h.launches++
	s, _ := h.d.a.compute.kernel(fn) // Launch found it
	for _, lm := range h.modules {
		if lm == s.module {
			return nil
		}
	}
	h.modules = append(h.modules, s.module)
	return nil
}

// Memset implements device.Device: refused (cuMemsetD8).
func (h *captureHandle) Memset(device.DevicePtr, byte, int64) error {
	return h.refuse("memset (cuMemsetD8)", whySync)
}

// CopyHtoD implements device.Device: refused (cuMemcpyHtoD).
func (h *captureHandle) CopyHtoD(device.DevicePtr, []byte) error {
	return h.refuse("copy host→device (cuMemcpyHtoD)", whySync)
}

// CopyDtoH implements device.Device: refused (cuMemcpyDtoH).
func (h *captureHandle) CopyDtoH([]byte, device.DevicePtr) error {
	return h.refuse("copy device→host (cuMemcpyDtoH)", whySync)
}

// CopyDtoD implements device.Device: refused (cuMemcpyDtoD).
func (h *captureHandle) CopyDtoD(device.DevicePtr, device.DevicePtr, int64) error {
	return h.refuse("copy device→device (cuMemcpyDtoD)", whySync)
}

// CopyHtoDAsync implements device.Device: refused (cuMemcpyHtoDAsync).
func (h *captureHandle) CopyHtoDAsync(device.DevicePtr, []byte) error {
	return h.refuse("copy host→device on the step stream (cuMemcpyHtoDAsync)", whyGoMem)
}

// CopyDtoHAsync implements device.Device: refused (cuMemcpyDtoHAsync).
func (h *captureHandle) CopyDtoHAsync([]byte, device.DevicePtr) error {
	return h.refuse("copy device→host on the step stream (cuMemcpyDtoHAsync)", whyGoMem)
}

// RecordEvent implements device.Device: refused (cuEventRecord).
func (h *captureHandle) RecordEvent() (device.Event, error) {
	return device.Event{}, h.refuse("record event (cuEventRecord)", whyEvents)
}

// Elapsed implements device.Device: refused (cuEventSynchronize).
func (h *captureHandle) Elapsed(device.Event, device.Event) (time.Duration, error) {
	return 0, h.refuse("elapsed (cuEventSynchronize, cuEventElapsedTime)", whyEvents)
}

// Synchronize implements device.Device: refused (cuStreamSynchronize).
func (h *captureHandle) Synchronize() error {
	return h.refuse("synchronize (cuStreamSynchronize)", whyEvents)
}

// LaunchGraph implements device.Device: refused (cuGraphLaunch).
func (h *captureHandle) LaunchGraph(device.Graph) error {
	return h.refuse("launch graph (cuGraphLaunch)", "a graph is replayed by a step, not captured into another")
}

// LeaveInFlight implements device.Device: a capture runs nothing, so
// there is nothing to leave in flight; it does nothing.
func (h *captureHandle) LeaveInFlight() {}

// LaunchGraph implements device.Device.
func (d *deviceHandle) LaunchGraph(g device.Graph) error {
	c, err := d.live("launch graph")
	if err != nil {
		return err
	}
	cg, err := d.a.graph(g)
	if err != nil {
		return err
	}
	if err := d.a.deviceCall("launch graph", func() error { return c.LaunchGraph(cg.handle) }); err != nil {
		return &device.GraphError{Op: "launch graph", Graph: g.Name, Err: err}
	}
	return nil
}
