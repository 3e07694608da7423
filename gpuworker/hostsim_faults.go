package gpuworker

import (
	"fmt"
	"time"
)

// Faults is the simulated device's fault plan. Call numbers count from 1 and
// per operation kind; 0 turns a fault off.
type Faults struct {
	// FailAllocAt makes the n-th Alloc return ErrOutOfMemory.
	FailAllocAt int
	// FailFreeAt makes the n-th Free return ErrInjected and keep the allocation.
	FailFreeAt int
	// Delay is added to every call (a slow device).
	Delay time.Duration
	// PanicAt makes the n-th call of any kind panic.
	PanicAt int
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
	plan   Faults
	calls  int
	allocs int
	frees  int
}

func newFaultState(plan Faults) *faultState { return &faultState{plan: plan} }

// before runs ahead of every backend call: it sleeps, panics or fails as planned.
func (f *faultState) before(op faultOp) error {
	f.calls++
	if f.plan.Delay > 0 {
		time.Sleep(f.plan.Delay)
	}
	if f.plan.PanicAt > 0 && f.calls == f.plan.PanicAt {
		panic(fmt.Sprintf("hostsim: injected panic in %s (call %d)", faultOpNames[op], f.calls))
	}
	switch op {
	case opAlloc:
		f.allocs++
		if f.plan.FailAllocAt > 0 && f.allocs == f.plan.FailAllocAt {
			return fmt.Errorf("alloc call %d: %w (injected)", f.allocs, ErrOutOfMemory)
		}
	case opFree:
		f.frees++
		if f.plan.FailFreeAt > 0 && f.frees == f.plan.FailFreeAt {
			return fmt.Errorf("free call %d: %w", f.frees, ErrInjected)
		}
	}
	return nil
}
