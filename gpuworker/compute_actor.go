package gpuworker

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// computeState is what the GPU actor keeps of compute: the modules loaded,
// one slot per kernel a step may launch, the events steps record, and
// whether a step left work in flight. It is used on the GPU thread only.
type computeState struct {
	// backend is the backend's Compute, nil when it has none; found once.
	backend Compute
	found   bool
	// modules are the loaded modules, oldest first.
	modules []*loadedModule
	// slots are the kernels; a device.Function's Handle is its module's
	// id and its slot's index (kernelRef). free are unused slot indices.
	slots []kernelSlot
	free  []int
	// events are the backend's events, reused from step to step; a step
	// uses the first stepEvents of them, under stepSeq.
	events     []EventHandle
	stepEvents int
	stepSeq    uint32
	// stepUsed: the step running now launched, copied on the stream or
	// recorded an event, so its end waits for the stream.
	stepUsed bool
	// inFlight: a step left its work in flight (LeaveInFlight).
	inFlight bool
	// graphs are the captured graphs held, oldest first (graph_actor.go).
	graphs []*capturedGraph
}

// loadedModule is one module the actor loaded.
type loadedModule struct {
	id     uint32
	handle ModuleHandle
	entry  device.ModuleEntry
	slots  []int
}

// kernelSlot is one kernel a step may launch.
type kernelSlot struct {
	module *loadedModule // nil: a free slot
	kernel KernelHandle
	name   string
	params []int // nil: unknown (cubin)
}

// moduleIDs numbers modules across every worker of the process, so a
// Function of one worker, or of an unloaded module, never names another's
// kernel.
var moduleIDs atomic.Uint32

// kernelRef packs a module id and a slot index into a Function's Handle.
func kernelRef(module uint32, slot int) uint64 { return uint64(module)<<32 | uint64(uint32(slot)) }

// computeBackend is the backend's Compute, or nil when it has none.
func (a *gpuActor) computeBackend() Compute {
	c := &a.compute
	if !c.found {
		c.backend, _ = a.backend.(Compute)
		c.found = true
	}
	return c.backend
}

// deviceCall runs a backend call through guard and makes the worker fatal
// when it reports ErrDeviceFault: a faulted context is unusable, so every
// later request must get the error.
func (a *gpuActor) deviceCall(op string, call func() error) error {
	err := a.guard(op, "", call)
	if err != nil && a.fatal == nil && errors.Is(err, ErrDeviceFault) {
		a.fatal = err
		a.status.setFatal(err)
		a.logger.Error("gpu worker: a kernel faulted and the device context is unusable; the worker serves no more requests", "err", err)
	}
	return err
}

// loadModule loads a module and gives each kernel the backend can run a
// slot.
func (a *gpuActor) loadModule(m *messages.LoadModule) messages.LoadModuleReply {
	fail := func(err error) messages.LoadModuleReply {
		return messages.LoadModuleReply{Err: &device.KernelError{Op: "load module", Module: m.Name, Err: err}}
	}
	if err := a.usable(m.Ctx); err != nil {
		return messages.LoadModuleReply{Err: err}
	}
	c := a.computeBackend()
	switch {
	case c == nil:
		return fail(fmt.Errorf("%w: backend %s", ErrNoCompute, a.backend.Info().Backend))
	case m.Name == "":
		return fail(fmt.Errorf("%w: empty module name", ErrInvalidValue))
	case a.module(m.Name) != nil:
		return fail(fmt.Errorf("%w: a module of that name is loaded; unload it first or use another name", ErrInvalidValue))
	}
	format, entries, err := parseImage(m.Image)
	if err != nil {
		return fail(err)
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.name
	}
	var (
		h     ModuleHandle
		ks    []KernelHandle
		kerrs []error
	)
	err = a.deviceCall("load module "+m.Name, func() (err error) {
		h, ks, kerrs, err = c.LoadModule(m.Image, format, names)
		return err
	})
	if err != nil {
		return fail(err)
	}
	lm := &loadedModule{id: moduleIDs.Add(1), handle: h}
	mod := &device.Module{Name: m.Name, Format: format, ImageBytes: int64(len(m.Image))}
	for i, e := range entries {
		if kerrs[i] != nil {
			if mod.Unrunnable == nil {
				mod.Unrunnable = map[string]string{}
			}
			mod.Unrunnable[e.name] = kerrs[i].Error()
			continue
		}
		s := a.newSlot(kernelSlot{module: lm, kernel: ks[i], name: e.name, params: e.params})
		lm.slots = append(lm.slots, s)
		mod.Functions = append(mod.Functions, device.Function{Module: m.Name, Name: e.name, ParamBytes: e.params, Handle: kernelRef(lm.id, s)})
	}
	lm.entry = device.ModuleEntry{Name: m.Name, Format: format, ImageBytes: mod.ImageBytes, Functions: len(mod.Functions), Loaded: time.Now()}
	a.compute.modules = append(a.compute.modules, lm)
	return messages.LoadModuleReply{Module: mod}
}

// newSlot stores s in a free slot, or a new one, and returns its index.
func (a *gpuActor) newSlot(s kernelSlot) int {
	c := &a.compute
	if n := len(c.free); n > 0 {
		i := c.free[n-1]
		c.free = c.free[:n-1]
		c.slots[i] = s
		return i
	}
	c.slots = append(c.slots, s)
	return len(c.slots) - 1
}

// module is the loaded module named name, or nil.
func (a *gpuActor) module(name string) *loadedModule {
	for _, lm := range a.compute.modules {
		if lm.entry.Name == name {
			return lm
		}
	}
	return nil
}

// unloadModule unloads a module; its Functions then fail with ErrNoModule.
// The module is forgotten even when the backend's unload fails: its
// kernels must not be launched again either way.
func (a *gpuActor) unloadModule(m *messages.UnloadModule) error {
	if err := a.usable(m.Ctx); err != nil {
		return err
	}
	lm := a.module(m.Name)
	if lm == nil {
		return &device.KernelError{Op: "unload module", Module: m.Name, Err: fmt.Errorf("%w (loaded: %v)", ErrNoModule, a.moduleNames())}
	}
	c := &a.compute
	for _, s := range lm.slots {
		c.slots[s] = kernelSlot{}
		c.free = append(c.free, s)
	}
	for i, o := range c.modules {
		if o == lm {
			c.modules = append(c.modules[:i], c.modules[i+1:]...)
			break
		}
	}
	if err := a.deviceCall("unload module "+m.Name, func() error { return c.backend.UnloadModule(lm.handle) }); err != nil {
		return &device.KernelError{Op: "unload module", Module: m.Name, Err: err}
	}
	return nil
}

func (a *gpuActor) moduleNames() []string {
	out := make([]string, len(a.compute.modules))
	for i, lm := range a.compute.modules {
		out[i] = lm.entry.Name
	}
	return out
}

// moduleEntries lists the loaded modules for a ledger snapshot.
func (a *gpuActor) moduleEntries() []device.ModuleEntry {
	if len(a.compute.modules) == 0 {
		return nil
	}
	out := make([]device.ModuleEntry, len(a.compute.modules))
	for i, lm := range a.compute.modules {
		out[i] = lm.entry
	}
	return out
}

// kernel returns fn's slot, checking that fn names a kernel this worker
// has loaded and not unloaded since.
func (c *computeState) kernel(fn device.Function) (*kernelSlot, error) {
	i := int(uint32(fn.Handle))
	if i < len(c.slots) {
		if s := &c.slots[i]; s.module != nil && s.module.id == uint32(fn.Handle>>32) {
			return s, nil
		}
	}
	return nil, &device.KernelError{Op: "launch", Module: fn.Module, Function: fn.Name,
		Err: fmt.Errorf("%w: the function's module was unloaded, or was loaded by another manager", ErrNoModule)}
}

// beginStep starts a forward step's compute: its events are new. Work of
// a step that runtime.Goexit cut short (its end never ran) counts as left
// in flight.
func (a *gpuActor) beginStep() {
	c := &a.compute
	if c.stepUsed {
		c.inFlight = true
	}
	c.stepSeq++
	c.stepEvents = 0
	c.stepUsed = false
}

// endStep ends a forward step's compute: unless the step left its work in
// flight, it waits for the step stream and returns stepErr joined with
// what the wait found (a fault makes the worker fatal).
func (a *gpuActor) endStep(dev *deviceHandle, stepErr error) error {
	c := &a.compute
	if !c.stepUsed || a.fatal != nil {
		return stepErr
	}
	c.stepUsed = false
	if dev.leave {
		c.inFlight = true
		return stepErr
	}
	c.inFlight = false
	if err := a.deviceCall("synchronize the step stream", c.backend.Synchronize); err != nil {
		return errors.Join(stepErr, fmt.Errorf("forward: the step's work on the device: %w", err))
	}
	return stepErr
}

// settle waits for the work a step left in flight, before a request other
// than the next forward step runs; a fault found makes the worker fatal,
// and the request then gets it.
func (a *gpuActor) settle() {
	c := &a.compute
	c.inFlight = false
	if a.fatal != nil {
		return
	}
	if err := a.deviceCall("synchronize the step stream", c.backend.Synchronize); err != nil && a.fatal == nil {
		a.logger.Warn("gpu worker: the work a forward step left in flight failed", "err", err)
	}
}

// event returns the backend event of h, which must have been recorded in
// the step running now.
func (c *computeState) event(h device.Event) (EventHandle, error) {
	i := int(uint32(h.Handle))
	if uint32(h.Handle>>32) != c.stepSeq || i >= c.stepEvents {
		return 0, fmt.Errorf("%w: the event was not recorded in this forward step (events end with their step)", ErrInvalidValue)
	}
	return c.events[i], nil
}
