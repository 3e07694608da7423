package gpuworker

import (
	"fmt"
	"time"

	"github.com/gpuarena/gpuarena/device"
)

// Faults is a fault plan for WithFaults. Call numbers count from 1 and per
// operation kind (allocs, frees, memsets, copies), except PanicAt and
// OnCall's, which count every call; 0 turns a fault off. A fault fires once,
// at its call.
//
// Each call runs, in order: Delay, OnCall, PanicAt, then the failure planned
// for its kind; a call that fails never reaches the wrapped backend.
type Faults struct {
	// FailAllocAt makes the n-th Alloc return ErrOutOfMemory.
	FailAllocAt int
	// FailFreeAt makes the n-th Free return ErrInjected and keep the allocation.
	FailFreeAt int
	// FailMemsetAt makes the n-th Memset return ErrInjected, writing nothing.
	FailMemsetAt int
	// FailCopyAt makes the n-th copy (host→device, device→host and
	// device→device count alike) return ErrInjected, copying nothing.
	FailCopyAt int
	// Delay is added to every call (a slow device).
	Delay time.Duration
	// PanicAt makes the n-th call of any kind panic.
	PanicAt int
	// OnCall, when set, runs before every call, on the GPU thread, with the
	// operation ("alloc", "free", "memset", "copy", "mem info") and the call's
	// number among all calls. A test blocks in it to hold the device in the
	// middle of a request (cancellation, shutdown), or panics in it. It must
	// not call the worker: the worker is busy running it.
	OnCall func(op string, call int)
}

// WithFaults wraps b, any backend, so that its calls slow down, fail or
// panic as plan says: Alloc, Free, Memset, the copies and MemInfo go through
// the plan first; Info and Close pass straight through. The wrapper keeps
// b's optional interfaces BytesInUseReporter, ThreadBinder and Compute
// (kernels run on b as they would without the plan), whose calls also pass
// straight through. Like b, it is used from the GPU actor's thread only.
func WithFaults(b Backend, plan Faults) Backend {
	f := &faultyBackend{b: b, plan: plan}
	r, reports := b.(BytesInUseReporter)
	t, binds := b.(ThreadBinder)
	c, computes := b.(Compute)
	switch {
	case reports && binds && computes:
		return struct {
			*faultyBackend
			BytesInUseReporter
			ThreadBinder
			Compute
		}{f, r, t, c}
	case reports && binds:
		return struct {
			*faultyBackend
			BytesInUseReporter
			ThreadBinder
		}{f, r, t}
	case reports && computes:
		return struct {
			*faultyBackend
			BytesInUseReporter
			Compute
		}{f, r, c}
	case binds && computes:
		return struct {
			*faultyBackend
			ThreadBinder
			Compute
		}{f, t, c}
	case reports:
		return struct {
			*faultyBackend
			BytesInUseReporter
		}{f, r}
	case binds:
		return struct {
			*faultyBackend
			ThreadBinder
		}{f, t}
	case computes:
		return struct {
			*faultyBackend
			Compute
		}{f, c}
	}
	return f
}

// faultyBackend is the Backend WithFaults makes.
type faultyBackend struct {
	b     Backend
	plan  Faults
	calls int
	// perOp counts the calls of each kind.
	perOp [len(faultOpNames)]int
}

type faultOp uint8

const (
	opAlloc faultOp = iota
	opFree
	opMemset
	opCopy
	opMemInfo
)

var faultOpNames = [...]string{opAlloc: "alloc", opFree: "free", opMemset: "memset", opCopy: "copy", opMemInfo: "mem info"}

// before runs ahead of every call the plan covers: it sleeps, calls OnCall,
// panics or fails as planned.
func (f *faultyBackend) before(op faultOp) error {
	f.calls++
	f.perOp[op]++
	n := f.perOp[op]
	if f.plan.Delay > 0 {
		time.Sleep(f.plan.Delay)
	}
	if f.plan.OnCall != nil {
		f.plan.OnCall(faultOpNames[op], f.calls)
	}
	if f.plan.PanicAt > 0 && f.calls == f.plan.PanicAt {
		panic(fmt.Sprintf("gpuworker: injected panic in %s (call %d)", faultOpNames[op], f.calls))
	}
	at := 0
	switch op {
	case opAlloc:
		if f.plan.FailAllocAt > 0 && n == f.plan.FailAllocAt {
			return fmt.Errorf("alloc call %d: %w (injected)", n, ErrOutOfMemory)
		}
	case opFree:
		at = f.plan.FailFreeAt
	case opMemset:
		at = f.plan.FailMemsetAt
	case opCopy:
		at = f.plan.FailCopyAt
	}
	if at > 0 && n == at {
		return fmt.Errorf("%s call %d: %w", faultOpNames[op], n, ErrInjected)
	}
	return nil
}

// Info describes the wrapped device.
func (f *faultyBackend) Info() DeviceInfo { return f.b.Info() }

// Alloc allocates on the wrapped device, unless the plan fails it.
func (f *faultyBackend) Alloc(bytes int64) (device.DevicePtr, error) {
	if err := f.before(opAlloc); err != nil {
		return 0, err
	}
	return f.b.Alloc(bytes)
}

// Free frees on the wrapped device, unless the plan fails it.
func (f *faultyBackend) Free(ptr device.DevicePtr) error {
	if err := f.before(opFree); err != nil {
		return err
	}
	return f.b.Free(ptr)
}

// Memset sets memory on the wrapped device, unless the plan fails it.
func (f *faultyBackend) Memset(ptr device.DevicePtr, value byte, bytes int64) error {
	if err := f.before(opMemset); err != nil {
		return err
	}
	return f.b.Memset(ptr, value, bytes)
}

// CopyHtoD copies to the wrapped device, unless the plan fails it.
func (f *faultyBackend) CopyHtoD(dst device.DevicePtr, src []byte) error {
	if err := f.before(opCopy); err != nil {
		return err
	}
	return f.b.CopyHtoD(dst, src)
}

// CopyDtoH copies from the wrapped device, unless the plan fails it.
func (f *faultyBackend) CopyDtoH(dst []byte, src device.DevicePtr) error {
	if err := f.before(opCopy); err != nil {
		return err
	}
	return f.b.CopyDtoH(dst, src)
}

// CopyDtoD copies on the wrapped device, unless the plan fails it.
func (f *faultyBackend) CopyDtoD(dst, src device.DevicePtr, bytes int64) error {
	if err := f.before(opCopy); err != nil {
		return err
	}
	return f.b.CopyDtoD(dst, src, bytes)
}

// MemInfo reads the wrapped device's memory, unless the plan fails it.
func (f *faultyBackend) MemInfo() (freeBytes, totalBytes int64, err error) {
	if err := f.before(opMemInfo); err != nil {
		return 0, 0, err
	}
	return f.b.MemInfo()
}

// Close closes the wrapped device.
func (f *faultyBackend) Close() error { return f.b.Close() }
