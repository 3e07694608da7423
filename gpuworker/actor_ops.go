package gpuworker

import (
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// handle answers one request (answer). Every reply channel has room for one
// reply, so sending never blocks.
func (a *gpuActor) handle(msg any) {
	if a.compute.inFlight {
		if _, step := msg.(*messages.Forward); !step {
			a.settle() // a step's work left in flight ends before anything else
		}
	}
	switch m := msg.(type) {
	case *messages.Ping:
		answer(a, m.Reply, a.usable(m.Ctx))
	case *messages.Alloc:
		ptr, err := a.alloc(m)
		answer(a, m.Reply, messages.AllocReply{Ptr: ptr, Err: err})
	case *messages.AllocBatch:
		answer(a, m.Reply, a.allocBatch(m))
	case *messages.Free:
		answer(a, m.Reply, a.free(m))
	case *messages.FreeBatch:
		answer(a, m.Reply, a.freeBatch(m))
	case *messages.FreeOwner:
		answer(a, m.Reply, a.freeOwner(m))
	case *messages.Memset:
		err := a.usable(m.Ctx)
		if err == nil {
			err = a.ops.Memset(m.Ptr, m.Value, m.Bytes)
		}
		answer(a, m.Reply, err)
	case *messages.CopyHtoD:
		err := a.usable(m.Ctx)
		if err == nil {
			err = a.ops.CopyHtoD(m.Dst, m.Src)
		}
		answer(a, m.Reply, err)
	case *messages.StagingUnregister:
		answer(a, m.Reply, a.stagingUnregister(m))
	case *messages.CopyHtoDStaged:
		answer(a, m.Reply, a.copyHtoDStaged(m))
	case *messages.CopyDtoH:
		answer(a, m.Reply, a.copyDtoH(m))
	case *messages.CopyDtoD:
		err := a.usable(m.Ctx)
		if err == nil {
			err = a.ops.CopyDtoD(m.Dst, m.Src, m.Bytes)
		}
		answer(a, m.Reply, err)
	case *messages.MemInfo:
		answer(a, m.Reply, a.memInfo(m))
	case *messages.Forward:
		answer(a, m.Reply, a.forward(m))
	case *messages.LedgerSnapshot:
		answer(a, m.Reply, a.snapshot())
	case *messages.AddView:
		answer(a, m.Reply, a.addView(m))
	case *messages.RetireOwners:
		answer(a, m.Reply, a.retireOwners(m))
	case *messages.Stats:
		answer(a, m.Reply, a.stats())
	case *messages.LoadModule:
		answer(a, m.Reply, a.loadModule(m))
	case *messages.UnloadModule:
		answer(a, m.Reply, a.unloadModule(m))
	case *messages.CaptureGraph:
		answer(a, m.Reply, a.captureGraph(m))
	case *messages.DestroyGraph:
		answer(a, m.Reply, a.destroyGraph(m))
	default:
		a.logger.Warn("gpu worker: unknown message", "type", fmt.Sprintf("%T", msg))
	}
}

// allocate makes one allocation and records it, or returns an
// *OutOfMemoryError / ErrInvalidValue naming the label.
func (a *gpuActor) allocate(owner, label string, bytes int64) (device.DevicePtr, error) {
	if bytes <= 0 {
		return 0, fmt.Errorf("alloc %s (%d B): %w: size must be > 0", label, bytes, ErrInvalidValue)
	}
	if a.overBudget(bytes) {
		a.ledger.failed()
		return 0, a.outOfMemory(owner, label, bytes, true, nil)
	}
	var ptr device.DevicePtr
	err := a.guard("alloc", label, func() error {
		var err error
		ptr, err = a.backend.Alloc(bytes)
		return err
	})
	if err != nil {
		a.ledger.failed()
		if errors.Is(err, ErrOutOfMemory) {
			return 0, a.outOfMemory(owner, label, bytes, false, err)
		}
		return 0, fmt.Errorf("alloc %s (%d B): %w", label, bytes, err)
	}
	a.ledger.add(ptr, bytes, label, owner)
	return ptr, nil
}

// overBudget reports whether bytes more would pass the budget (0: none).
// It never overflows: the ledger holds at most the budget, so budget −
// current is ≥ 0, where current + bytes could wrap past MaxInt64 and let a
// huge request through.
func (a *gpuActor) overBudget(bytes int64) bool {
	return a.budget > 0 && bytes > a.budget-a.ledger.counters.CurrentBytes
}

func (a *gpuActor) alloc(m *messages.Alloc) (device.DevicePtr, error) {
	if err := a.usable(m.Ctx); err != nil {
		return 0, err
	}
	return a.allocate(m.Owner, m.Label, m.Bytes)
}

// release frees a ledgered pointer and forgets it; on failure it stays in the
// ledger (the backend still holds it).
func (a *gpuActor) release(ptr device.DevicePtr) error {
	e := a.ledger.entries[ptr]
	err := a.guard("free", e.Label, func() error { return a.backend.Free(ptr) })
	if err != nil {
		return fmt.Errorf("free %s (%d B, owner %q): %w", e.Label, e.Bytes, e.Owner, err)
	}
	a.ledger.remove(ptr)
	return nil
}

func (a *gpuActor) free(m *messages.Free) error {
	if err := a.usable(m.Ctx); err != nil {
		return err
	}
	if _, err := a.ledger.lookup(m.Ptr, m.Owner); err != nil {
		return fmt.Errorf("free: %w", err)
	}
	return a.release(m.Ptr)
}

func (a *gpuActor) freeBatch(m *messages.FreeBatch) messages.FreeBatchReply {
	if err := a.usable(m.Ctx); err != nil {
		return messages.FreeBatchReply{Failed: m.Ptrs, Err: err}
	}
	var r messages.FreeBatchReply
	for _, ptr := range m.Ptrs {
		err := func() error {
			if a.fatal != nil {
				return a.fatal // the backend panicked: call it no more, as for separate requests
			}
			if _, err := a.ledger.lookup(ptr, m.Owner); err != nil {
				return fmt.Errorf("free: %w", err)
			}
			return a.release(ptr)
		}()
		if err != nil {
			r.Failed = append(r.Failed, ptr)
			if r.Err == nil {
				r.Err = err
			}
		}
	}
	return r
}

func (a *gpuActor) freeOwner(m *messages.FreeOwner) messages.FreeOwnerReply {
	if err := a.usable(m.Ctx); err != nil {
		return messages.FreeOwnerReply{Err: err}
	}
	var r messages.FreeOwnerReply
	for _, e := range a.ledger.owned(m.Owner) {
		bytes := e.Bytes
		if err := a.release(e.Ptr); err != nil {
			if r.Err == nil {
				r.Err = err
			}
			continue
		}
		r.Freed++
		r.Bytes += bytes
	}
	return r
}

func (a *gpuActor) copyDtoH(m *messages.CopyDtoH) messages.CopyDtoHReply {
	if err := a.usable(m.Ctx); err != nil {
		return messages.CopyDtoHReply{Err: err}
	}
	// Check the range before making the host buffer: a bad request must not
	// allocate m.Bytes of host memory.
	if err := a.ops.check("copy device→host", m.Src, m.Bytes); err != nil {
		return messages.CopyDtoHReply{Err: err}
	}
	data := make([]byte, m.Bytes)
	if err := a.guard("copy device→host", "", func() error { return a.backend.CopyDtoH(data, m.Src) }); err != nil {
		return messages.CopyDtoHReply{Err: err}
	}
	return messages.CopyDtoHReply{Data: data}
}

func (a *gpuActor) memInfo(m *messages.MemInfo) messages.MemInfoReply {
	if err := a.usable(m.Ctx); err != nil {
		return messages.MemInfoReply{Err: err}
	}
	var r messages.MemInfoReply
	r.Err = a.guard("mem info", "", func() error {
		var err error
		r.FreeBytes, r.TotalBytes, err = a.backend.MemInfo()
		return err
	})
	return r
}

// forward runs the step with a device handle that dies when the step returns.
func (a *gpuActor) forward(m *messages.Forward) messages.ForwardReply {
	if err := a.usable(m.Ctx); err != nil {
		return messages.ForwardReply{Err: err}
	}
	if m.Step == nil {
		return messages.ForwardReply{Err: fmt.Errorf("forward: %w: nil step", ErrInvalidValue)}
	}
	select {
	case <-a.closing:
		return messages.ForwardReply{Err: fmt.Errorf("forward: %w: the worker started to stop before this step started; it did not run", ErrClosed)}
	default:
	}
	dev := a.device()
	defer dev.invalidate()
	a.beginStep()
	start := time.Now()
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				pe := &StepPanicError{Value: r, Stack: debug.Stack()}
				a.logger.Error("forward step panicked; the GPU actor goes on serving", "panic", fmt.Sprint(r), "stack", string(pe.Stack))
				err = pe
			}
		}()
		return m.Step(dev)
	}()
	err = a.endStep(dev, err)
	return messages.ForwardReply{Duration: time.Since(start), Err: err}
}

func (a *gpuActor) snapshot() device.Ledger {
	s := a.ledger.snapshot(time.Now())
	s.Modules = a.moduleEntries()
	s.Graphs = a.graphEntries()
	if r, ok := a.backend.(BytesInUseReporter); ok {
		s.BackendBytesInUse = r.BytesInUse()
	}
	return s
}

func (a *gpuActor) stats() device.Stats {
	s := device.Stats{ThreadIDs: a.dispatcher.ThreadIDs(), Messages: a.messages, Takeovers: a.dispatcher.Takeovers()}
	if a.backend != nil {
		s.Backend = a.backend.Info().Backend
	}
	return s
}

// outOfMemory builds the error of a refused allocation from the ledger and
// the device's free memory.
func (a *gpuActor) outOfMemory(owner, label string, bytes int64, overBudget bool, cause error) error {
	info := a.backend.Info()
	e := &OutOfMemoryError{
		Label: label, Owner: owner, Bytes: bytes,
		Device: info.Ordinal, DeviceName: info.Name,
		DeviceFree: -1, DeviceTotal: info.TotalBytes,
		HeldByOwner: a.ledger.heldByOwner(),
		Budget:      a.budget, OverBudget: overBudget,
		Largest: a.ledger.largest(3),
		Cause:   cause,
	}
	if a.fatal == nil {
		_ = a.guard("mem info", "", func() error {
			free, total, err := a.backend.MemInfo()
			if err == nil {
				e.DeviceFree, e.DeviceTotal = free, total
			}
			return err
		})
	}
	switch {
	case overBudget:
		e.ShortfallBytes = bytes - (a.budget - a.ledger.counters.CurrentBytes)
	case e.DeviceFree >= 0 && bytes > e.DeviceFree:
		e.ShortfallBytes = bytes - e.DeviceFree
	}
	return e
}

// answer publishes the ledger's totals (publishTotals), then sends v on
// reply: a caller holding its answer finds the ledger as its request left
// it in Worker.LedgerTotals (a scrape right after BuildArena shows the
// arena).
func answer[T any](a *gpuActor, reply chan<- T, v T) {
	a.publishTotals()
	reply <- v
}
