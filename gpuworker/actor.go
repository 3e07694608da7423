package gpuworker

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena/messages"
)

// gpuActor is the one actor that calls the backend. It runs on a
// PinnedDispatcher, so its Receive, and with it every backend call, runs on
// one locked OS thread. Its mailbox runs one message at a time: two forward
// steps never overlap and the ledger needs no lock.
type gpuActor struct {
	factory     BackendFactory
	dispatcher  *PinnedDispatcher
	utilization float64
	logger      *slog.Logger
	ready       chan<- startResult
	status      *workerStatus

	backend  Backend
	budget   int64
	ledger   *ledger
	ops      deviceHandle // checks and runs memset and copy requests
	messages uint64
	// fatal is set when the backend panicked; every later request gets it.
	fatal error
}

type startResult struct {
	info   DeviceInfo
	budget int64
	err    error
}

// Receive dispatches one message.
func (a *gpuActor) Receive(c actor.Context) {
	defer a.escaped()
	switch m := c.Message().(type) {
	case *actor.Started:
		a.start()
	case *actor.Stopping:
		a.freeAll()
	case *actor.Stopped:
		a.close()
		a.status.exit()
	default:
		a.messages++
		a.handle(m)
	}
}

// escaped records a panic that escapes Receive (a bug in the actor's own
// code: the backend's panics are recovered by guard) as the worker's fatal
// error, then panics again so that protoactor-go's supervision handles it.
// The actor's guardian has the stop directive (Start), so the actor is
// stopped, never restarted: its Stopping and Stopped handlers free what the
// ledger holds and close the backend, on this thread.
func (a *gpuActor) escaped() {
	r := recover()
	if r == nil {
		return
	}
	err := fmt.Errorf("%w: %v", ErrActorPanic, r)
	if a.fatal == nil {
		a.fatal = err
	}
	a.status.setFatal(err)
	a.logger.Error("gpu actor panicked; it is stopped, never restarted", "panic", fmt.Sprint(r))
	panic(r)
}

func (a *gpuActor) start() {
	a.ledger = newLedger()
	a.ops = deviceHandle{a: a}
	var b Backend
	err := a.guard("open backend", "", func() error {
		var err error
		b, err = a.factory()
		return err
	})
	if err == nil && b == nil {
		err = fmt.Errorf("open backend: %w: the backend factory returned a nil Backend and no error", ErrInvalidValue)
	}
	if err != nil {
		a.fatal = err
		a.ready <- startResult{err: err}
		return
	}
	a.backend = b
	if a.utilization > 0 {
		if err := a.setBudget(); err != nil {
			a.fatal = err
			a.ready <- startResult{err: err}
			return
		}
	}
	var info DeviceInfo
	if err := a.guard("device info", "", func() error { info = b.Info(); return nil }); err != nil {
		a.ready <- startResult{err: err}
		return
	}
	a.ready <- startResult{info: info, budget: a.budget}
}

// guard runs a backend call, turning a panic into ErrBackendPanic and marking
// the actor fatal: after a panic the backend's state is unknown, so the actor
// stops calling it (but still frees what the ledger holds when it stops).
// The error names op and, when not empty, the buffer label (joined only on
// a panic: guard runs on every backend call).
func (a *gpuActor) guard(op, label string, call func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if label != "" {
				op += " " + label
			}
			err = fmt.Errorf("%s: %w: %v", op, ErrBackendPanic, r)
			a.fatal = err
			a.status.setFatal(err)
			a.logger.Error("backend panicked; the GPU worker serves no more requests", "op", op, "panic", fmt.Sprint(r))
		}
	}()
	return call()
}

// usable returns the error a request gets before any work: the actor's fatal
// error, or the context's.
func (a *gpuActor) usable(ctx context.Context) error {
	if a.fatal != nil {
		return a.fatal
	}
	if ctx != nil {
		return ctx.Err()
	}
	return nil
}

// freeAll frees every allocation still in the ledger, newest first, on the
// GPU thread, when the actor stops. It runs even after a backend panic: a
// leaked device allocation outlives the process's usefulness.
func (a *gpuActor) freeAll() {
	if a.backend == nil {
		return
	}
	for _, e := range a.ledger.all() {
		err := a.guardFree(e.Ptr)
		if err != nil {
			a.logger.Error("free on stop failed", "label", e.Label, "owner", e.Owner, "bytes", e.Bytes, "err", err)
			continue
		}
		a.ledger.remove(e.Ptr)
	}
}

// guardFree frees ptr, recovering a panic without marking the actor fatal
// again (used on stop).
func (a *gpuActor) guardFree(ptr messages.DevicePtr) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("free %#x: %w: %v", uint64(ptr), ErrBackendPanic, r)
		}
	}()
	return a.backend.Free(ptr)
}

func (a *gpuActor) close() {
	if a.backend == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			a.logger.Error("backend panicked on close", "panic", fmt.Sprint(r))
		}
	}()
	if err := a.backend.Close(); err != nil {
		a.logger.Error("backend close failed", "err", err)
	}
}

// setBudget computes the budget from gpu_memory_utilization and the memory
// other processes hold now (design.md §6).
func (a *gpuActor) setBudget() error {
	var free, total int64
	err := a.guard("mem info", "", func() error {
		var err error
		free, total, err = a.backend.MemInfo()
		return err
	})
	if err != nil {
		return fmt.Errorf("gpu_memory_utilization: %w", err)
	}
	others := total - free
	a.budget = int64(a.utilization*float64(total)) - others
	if a.budget <= 0 {
		return fmt.Errorf("gpu_memory_utilization %.2f of %d B is %d B, but other processes already hold %d B: %w; raise gpu_memory_utilization or free the device",
			a.utilization, total, int64(a.utilization*float64(total)), others, ErrOutOfMemory)
	}
	return nil
}
