package gpuworker

import (
	"fmt"
	"time"
)

// Faults is the simulated device's fault plan. Call numbers count from 1 and
// per operation kind (allocs, frees, memsets, copies), except PanicAt and
// OnCall's, which count every call; 0 turns a fault off. A fault fires once,
// at its call.
//
// Each call runs, in order: Delay, OnCall, PanicAt, then the failure planned
// for its kind.
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

type faultOp uint8

const (
	opAlloc faultOp = iota
	opFree
	opMemset
	opCopy
	opMemInfo
)

var faultOpNames = [...]string{opAlloc: "alloc", opFree: "free", opMemset: "memset", opCopy: "copy", opMemInfo: "mem info"}

// faultState counts calls against a Faults plan. It is used on the GPU thread only.
type faultState struct {
	plan  Faults
	calls int
	// perOp counts the calls of each kind.
	perOp [len(faultOpNames)]int
}

func newFaultState(plan Faults) *faultState { return &faultState{plan: plan} }

// before runs ahead of every backend call: it sleeps, calls OnCall, panics or
// fails as planned.
func (f *faultState) before(op faultOp) error {
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
		panic(fmt.Sprintf("hostsim: injected panic in %s (call %d)", faultOpNames[op], f.calls))
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
