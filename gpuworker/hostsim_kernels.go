package gpuworker

import (
	"errors"
	"fmt"
	"time"

	"github.com/gpuarena/gpuarena/device"
)

// The simulated device's Compute: a module's kernels are the Go kernels
// registered under its .entry names (HostSimConfig.Kernels, else
// DefaultKernels), run on the calling thread when launched, so the stream
// is always idle and an event is the host's clock.

var _ Compute = (*HostSim)(nil)

// hostCompute is the simulated device's modules, kernels and events.
type hostCompute struct {
	kernels []HostKernel // by KernelHandle; nil once unloaded
	names   []string     // by KernelHandle
	modules [][]KernelHandle
	events  []time.Time
	// fault is the first kernel fault; like a CUDA context's sticky error,
	// every later launch, copy on the stream and wait returns it.
	fault error
	// capture is the graph being captured, nil when none is; graphs are
	// the captured ones by GraphHandle, nil once destroyed
	// (hostsim_graph.go).
	capture *[]hostLaunch
	graphs  [][]hostLaunch
}

// Limits the simulated device refuses a launch past, as an H200 does
// (cudaDeviceProp: maxThreadsPerBlock, maxThreadsDim, maxGridSize,
// sharedMemPerBlock without the opt-in attribute).
const (
	hostMaxThreadsPerBlock = 1024
	hostMaxBlockZ          = 64
	hostMaxGridX           = 1<<31 - 1
	hostMaxGridYZ          = 65535
	hostMaxSharedBytes     = 48 << 10
)

// checkLaunch refuses what an H200 refuses with CUDA_ERROR_INVALID_VALUE.
func checkLaunch(c device.LaunchConfig) error {
	g, b := c.Grid, c.Block
	threads := uint64(b.X) * uint64(b.Y) * uint64(b.Z)
	switch {
	case g.X == 0 || g.Y == 0 || g.Z == 0 || b.X == 0 || b.Y == 0 || b.Z == 0:
		return fmt.Errorf("%w: grid %v, block %v: no dimension may be 0", ErrLaunchConfig, g, b)
	case g.X > hostMaxGridX || g.Y > hostMaxGridYZ || g.Z > hostMaxGridYZ:
		return fmt.Errorf("%w: grid %v: the most is {%d %d %d}", ErrLaunchConfig, g, hostMaxGridX, hostMaxGridYZ, hostMaxGridYZ)
	case threads > hostMaxThreadsPerBlock || b.Z > hostMaxBlockZ:
		return fmt.Errorf("%w: block %v (%d threads): the most is %d threads, z ≤ %d", ErrLaunchConfig, b, threads, hostMaxThreadsPerBlock, hostMaxBlockZ)
	case c.SharedBytes > hostMaxSharedBytes:
		return fmt.Errorf("%w: %d B of shared memory per block: the most is %d B", ErrLaunchConfig, c.SharedBytes, hostMaxSharedBytes)
	}
	return nil
}

// registry is the kernel registry the device maps .entry names with.
func (h *HostSim) registry() *KernelRegistry {
	if h.cfg.Kernels != nil {
		return h.cfg.Kernels
	}
	return DefaultKernels
}

// LoadModule maps the PTX .entry names to the registered Go kernels; a
// name with none cannot run (ErrNoFunction). A cubin is refused: the
// simulated device runs no machine code.
func (h *HostSim) LoadModule(image []byte, format string, names []string) (ModuleHandle, []KernelHandle, []error, error) {
	h.record()
	c := &h.compute
	if format != FormatPTX {
		return 0, nil, nil, fmt.Errorf("%w: the simulated device runs PTX modules only (it maps their .entry names to Go kernels), not a %s", ErrBadModule, format)
	}
	ks := make([]KernelHandle, len(names))
	errs := make([]error, len(names))
	var mine []KernelHandle
	for i, n := range names {
		k, ok := h.registry().Lookup(n)
		if !ok {
			errs[i] = fmt.Errorf("%w: the simulated device has no Go kernel registered as %q (gpuworker.RegisterKernel)", ErrNoFunction, n)
			continue
		}
		ks[i] = KernelHandle(len(c.kernels))
		c.kernels = append(c.kernels, k)
		c.names = append(c.names, n)
		mine = append(mine, ks[i])
	}
	c.modules = append(c.modules, mine)
	return ModuleHandle(len(c.modules) - 1), ks, errs, nil
}

// UnloadModule forgets the module's kernels.
func (h *HostSim) UnloadModule(m ModuleHandle) error {
	h.record()
	c := &h.compute
	if int(m) >= len(c.modules) {
		return fmt.Errorf("unload module %d: %w", m, ErrNoModule)
	}
	for _, k := range c.modules[m] {
		c.kernels[k] = nil
	}
	c.modules[m] = nil
	return nil
}

// Launch runs the kernel now, on the calling thread, or records it while
// a graph is captured. A kernel's access outside an allocation faults the
// device for good (ErrDeviceFault).
func (h *HostSim) Launch(k KernelHandle, cfg device.LaunchConfig, args []uint64, _ bool) error {
	h.record()
	c := &h.compute
	if c.fault != nil {
		return c.fault
	}
	if int(k) >= len(c.kernels) || c.kernels[k] == nil {
		return fmt.Errorf("launch kernel %d: %w", k, ErrNoModule)
	}
	if err := checkLaunch(cfg); err != nil {
		return err
	}
	if c.capture != nil {
		*c.capture = append(*c.capture, hostLaunch{kernel: k, cfg: cfg, args: append([]uint64(nil), args...)})
		return nil
	}
	return h.run(k, cfg, args)
}

// run runs kernel k now, on the calling thread.
func (h *HostSim) run(k KernelHandle, cfg device.LaunchConfig, args []uint64) error {
	c := &h.compute
	err := c.kernels[k](&HostLaunch{Config: cfg, Args: args, sim: h})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrDeviceFault):
		c.fault = fmt.Errorf("kernel %s: %w", c.names[k], err)
		return c.fault
	}
	return fmt.Errorf("kernel %s: %w", c.names[k], err)
}

// StreamCopyHtoD copies src to dst now.
func (h *HostSim) StreamCopyHtoD(dst device.DevicePtr, src []byte) error {
	if h.compute.fault != nil {
		return h.compute.fault
	}
	return h.CopyHtoD(dst, src)
}

// StreamCopyDtoH copies to dst now.
func (h *HostSim) StreamCopyDtoH(dst []byte, src device.DevicePtr) error {
	if h.compute.fault != nil {
		return h.compute.fault
	}
	return h.CopyDtoH(dst, src)
}

// NewEvent makes an event.
func (h *HostSim) NewEvent() (EventHandle, error) {
	h.record()
	h.compute.events = append(h.compute.events, time.Time{})
	return EventHandle(len(h.compute.events) - 1), nil
}

// RecordEvent records the host's clock: the kernels launched before it
// have run.
func (h *HostSim) RecordEvent(e EventHandle) error {
	h.record()
	if h.compute.fault != nil {
		return h.compute.fault
	}
	h.compute.events[e] = time.Now()
	return nil
}

// EventElapsed returns the host time between two recorded events.
func (h *HostSim) EventElapsed(start, end EventHandle) (time.Duration, error) {
	h.record()
	return h.compute.events[end].Sub(h.compute.events[start]), h.compute.fault
}

// Synchronize has nothing to wait for; it returns the fault, if any.
func (h *HostSim) Synchronize() error {
	h.record()
	return h.compute.fault
}
