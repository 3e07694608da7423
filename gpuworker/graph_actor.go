package gpuworker

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// capturedGraph is one graph the actor holds: the backend's instantiated
// graph and the modules whose kernels it launches.
type capturedGraph struct {
	id      uint64
	handle  GraphHandle
	modules []*loadedModule
	entry   device.GraphEntry
}

// graphIDs numbers graphs across every worker of the process, so a Graph
// of one worker, or a destroyed one, never names another's.
var graphIDs atomic.Uint64

// captureGraph runs m.Capture on the GPU thread with the step stream in
// capture mode and keeps the instantiated graph. A capture whose function
// fails (or panics, or makes a launch that fails) is ended and dropped, and
// its error returned: nothing is left of it. runtime.Goexit in the
// function ends the capture too (the deferred end runs on this thread
// before the goroutine does), and exiting answers the request.
func (a *gpuActor) captureGraph(m *messages.CaptureGraph) messages.CaptureGraphReply {
	fail := func(err error) messages.CaptureGraphReply {
		return messages.CaptureGraphReply{Err: &device.GraphError{Op: "capture graph", Graph: m.Name, Err: err}}
	}
	if err := a.usable(m.Ctx); err != nil {
		return messages.CaptureGraphReply{Err: err}
	}
	c := a.computeBackend()
	switch {
	case c == nil:
		return fail(fmt.Errorf("%w: backend %s", ErrNoCompute, a.backend.Info().Backend))
	case m.Name == "":
		return fail(fmt.Errorf("%w: empty graph name", ErrInvalidValue))
	case a.graphNamed(m.Name) != nil:
		return fail(fmt.Errorf("%w: a graph of that name is held; destroy it first or use another name", ErrInvalidValue))
	case m.Capture == nil:
		return fail(fmt.Errorf("%w: nil capture function", ErrInvalidValue))
	}
	select {
	case <-a.closing:
		return fail(fmt.Errorf("%w: the worker started to stop before this capture started; it did not run", ErrClosed))
	default:
	}
	if err := a.deviceCall("begin capture", c.BeginCapture); err != nil {
		return fail(err)
	}
	dev := &captureHandle{d: a.device()}
	used := a.compute.stepUsed
	open := true
	defer func() {
		dev.d.invalidate()
		a.compute.stepUsed = used
		if open { // runtime.Goexit in the capture function
			_ = a.deviceCall("end capture", func() error { _, err := c.EndCapture(false); return err })
		}
	}()
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				pe := &StepPanicError{Value: r, Stack: debug.Stack()}
				a.logger.Error("graph capture panicked; the GPU actor goes on serving", "panic", fmt.Sprint(r), "stack", string(pe.Stack))
				err = pe
			}
		}()
		return m.Capture(dev)
	}()
	if err == nil {
		err = dev.failed
	}
	var h GraphHandle
	open = false
	endErr := a.deviceCall("end capture", func() (e error) { h, e = c.EndCapture(err == nil); return e })
	if err != nil {
		return fail(errors.Join(err, endErr))
	}
	if endErr != nil {
		return fail(endErr)
	}
	g := &capturedGraph{id: graphIDs.Add(1), handle: h, modules: dev.modules,
		entry: device.GraphEntry{Name: m.Name, Launches: dev.launches, Captured: time.Now()}}
	for _, lm := range dev.modules {
		g.entry.Modules = append(g.entry.Modules, lm.entry.Name)
	}
	a.compute.graphs = append(a.compute.graphs, g)
	return messages.CaptureGraphReply{Graph: device.Graph{Name: m.Name, Launches: dev.launches, Handle: g.id}}
}

// graphNamed is the graph named name, or nil.
func (a *gpuActor) graphNamed(name string) *capturedGraph {
	for _, g := range a.compute.graphs {
		if g.entry.Name == name {
			return g
		}
	}
	return nil
}

// graph returns the graph g names, checking that this worker holds it and
// that every module it launches kernels of is still loaded.
func (a *gpuActor) graph(g device.Graph) (*capturedGraph, error) {
	for _, cg := range a.compute.graphs {
		if cg.id != g.Handle {
			continue
		}
		for _, lm := range cg.modules {
			if a.module(lm.entry.Name) != lm {
				return nil, &device.GraphError{Op: "launch graph", Graph: g.Name,
					Err: &device.KernelError{Op: "launch", Module: lm.entry.Name, Err: fmt.Errorf("%w: the module was unloaded after the graph was captured; capture it again", ErrNoModule)}}
			}
		}
		return cg, nil
	}
	return nil, &device.GraphError{Op: "launch graph", Graph: g.Name,
		Err: fmt.Errorf("%w: destroyed, or captured by another manager (held: %v)", ErrNoGraph, a.graphNames())}
}

func (a *gpuActor) graphNames() []string {
	out := make([]string, len(a.compute.graphs))
	for i, g := range a.compute.graphs {
		out[i] = g.entry.Name
	}
	return out
}

// destroyGraph destroys a graph; its Graph values then fail to launch with
// ErrNoGraph. The graph is forgotten even when the backend's destruction
// fails: it must not be replayed again either way.
func (a *gpuActor) destroyGraph(m *messages.DestroyGraph) error {
	if err := a.usable(m.Ctx); err != nil {
		return err
	}
	g := a.graphNamed(m.Name)
	if g == nil {
		return &device.GraphError{Op: "destroy graph", Graph: m.Name, Err: fmt.Errorf("%w (held: %v)", ErrNoGraph, a.graphNames())}
	}
	c := &a.compute
	for i, o := range c.graphs {
		if o == g {
			c.graphs = append(c.graphs[:i], c.graphs[i+1:]...)
			break
		}
	}
	if err := a.deviceCall("destroy graph "+m.Name, func() error { return c.backend.DestroyGraph(g.handle) }); err != nil {
		return &device.GraphError{Op: "destroy graph", Graph: m.Name, Err: err}
	}
	return nil
}

// graphEntries lists the graphs held for a ledger snapshot.
func (a *gpuActor) graphEntries() []device.GraphEntry {
	if len(a.compute.graphs) == 0 {
		return nil
	}
	out := make([]device.GraphEntry, len(a.compute.graphs))
	for i, g := range a.compute.graphs {
		out[i] = g.entry
	}
	return out
}
