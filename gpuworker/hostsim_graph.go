package gpuworker

import (
	"fmt"

	"github.com/gpuarena/gpuarena/device"
)

// The simulated device's graphs: a capture records each launch (its
// kernel, configuration and a copy of its argument words) through the
// same Launch a step calls, and a replay runs them again in order, on the
// calling thread, as cuGraphLaunch runs a captured graph's kernel nodes in
// their stream order.

// hostLaunch is one launch recorded into a graph.
type hostLaunch struct {
	kernel KernelHandle
	cfg    device.LaunchConfig
	args   []uint64
}

// BeginCapture starts recording launches.
func (h *HostSim) BeginCapture() error {
	h.record()
	c := &h.compute
	if c.capture != nil {
		return fmt.Errorf("begin capture: %w: a capture is under way", ErrNotCapturable)
	}
	c.capture = &[]hostLaunch{}
	return c.fault
}

// EndCapture stops recording; with keep the launches recorded become a
// graph.
func (h *HostSim) EndCapture(keep bool) (GraphHandle, error) {
	h.record()
	c := &h.compute
	if c.capture == nil {
		return 0, fmt.Errorf("end capture: %w: no capture is under way", ErrNotCapturable)
	}
	launches := *c.capture
	c.capture = nil
	if !keep {
		return 0, nil
	}
	if c.fault != nil {
		return 0, c.fault
	}
	c.graphs = append(c.graphs, launches)
	return GraphHandle(len(c.graphs) - 1), nil
}

// LaunchGraph runs the graph's launches in order; the first that fails
// ends the replay (a fault is sticky, as a kernel's is).
func (h *HostSim) LaunchGraph(g GraphHandle) error {
	h.record()
	c := &h.compute
	if c.fault != nil {
		return c.fault
	}
	if int(g) >= len(c.graphs) || c.graphs[g] == nil {
		return fmt.Errorf("launch graph %d: %w", g, ErrNoGraph)
	}
	for _, l := range c.graphs[g] {
		if c.kernels[l.kernel] == nil {
			return fmt.Errorf("launch graph %d: kernel %s: %w", g, c.names[l.kernel], ErrNoModule)
		}
		if err := h.run(l.kernel, l.cfg, l.args); err != nil {
			return err
		}
	}
	return nil
}

// DestroyGraph forgets the graph.
func (h *HostSim) DestroyGraph(g GraphHandle) error {
	h.record()
	c := &h.compute
	if int(g) >= len(c.graphs) || c.graphs[g] == nil {
		return fmt.Errorf("destroy graph %d: %w", g, ErrNoGraph)
	}
	c.graphs[g] = nil
	return nil
}
