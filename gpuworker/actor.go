package gpuworker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker/internal/pinned"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// gpuActor is the one actor that calls the backend. It runs on a
// pinned.Dispatcher, so its Receive, and with it every backend call, runs on
// one locked OS thread. Its mailbox runs one message at a time: two forward
// steps never overlap and the ledger needs no lock.
type gpuActor struct {
	factory     BackendFactory
	dispatcher  *pinned.Dispatcher
	utilization float64 // gpu_memory_utilization; 0 with WithoutBudget: no budget
	logger      *slog.Logger
	ready       chan<- startResult
	status      *workerStatus
	closing     <-chan struct{} // closed when the Worker starts to stop

	backend  Backend
	budget   int64
	ledger   *ledger
	ops      *deviceHandle // checks and runs memset and copy requests
	messages uint64
	// fatal is set when the backend panicked; every later request gets it.
	fatal error
	// current is the request being handled, until its handler returns; the
	// Goexit path (escaped) answers it if it is still set. stopping is set
	// while the Stopping handler frees the ledger.
	current  any
	stopping bool
	// compute is the modules, kernels, events and stream state of forward
	// steps that launch kernels (compute_actor.go).
	compute computeState
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
		a.stopping = true
		a.freeAll()
		a.stopping = false
	case *actor.Stopped:
		a.stopped()
	default:
		a.messages++
		a.current = m
		a.handle(m)
		a.current = nil
	}
}

// publishTotals publishes the ledger's counters and per-owner usage when
// the last request changed them (Worker.LedgerTotals): a comparison of five
// counters per request, a copy of the owners only on a change.
func (a *gpuActor) publishTotals() {
	if a.ledger.counters == a.status.totals.Load().Counters {
		return
	}
	a.status.totals.Store(&device.Ledger{Counters: a.ledger.counters, Owners: maps.Clone(a.ledger.owners), BackendBytesInUse: -1, Taken: time.Now()})
}

// stopped closes the backend, tells the Worker, and ends the pinned thread
// once this message is handled.
func (a *gpuActor) stopped() {
	a.close()
	a.status.exit()
	a.dispatcher.StopSoon()
}

// escaped records a panic that escapes Receive (a bug in the actor's own
// code: the backend's panics are recovered by guard) as the worker's fatal
// error, then panics again so that protoactor-go's supervision handles it.
// The actor's guardian has the stop directive (Start), so the actor is
// stopped, never restarted: its Stopping and Stopped handlers free what the
// ledger holds and close the backend, on this thread.
//
// A nil recover with a request still current (or the Stopping handler
// unfinished) means runtime.Goexit is ending the goroutine; see exiting.
func (a *gpuActor) escaped() {
	r := recover()
	if r == nil {
		if a.current != nil || a.stopping {
			a.exiting()
		}
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

// exiting runs when runtime.Goexit ends the pinned goroutine in the middle
// of a message: a forward step called it (t.FailNow, require.* in a step),
// or the backend did. The dispatcher starts a fresh goroutine on a fresh
// locked thread that goes on with the mailbox (rebind makes the backend's
// context current there); here, still on the old thread, the request that
// was cut short is answered so its caller does not wait forever: with
// ErrStepExited when the step exited (the actor keeps serving: the backend's
// state is known, every call it made returned), or with the fatal error
// guard recorded when the backend did.
//
// When the backend exits while the actor stops (freeing the ledger on
// Stopping), the rest of the stop cannot run on this goroutine: what the
// ledger still holds is logged, and the Worker is told the actor has exited.
func (a *gpuActor) exiting() {
	if a.stopping {
		a.stopping = false
		a.logger.Error("the backend called runtime.Goexit while the GPU actor freed its ledger; what it still holds is left on the device",
			"allocations", len(a.ledger.entries), "bytes", a.ledger.counters.CurrentBytes)
		a.status.exit()
		a.dispatcher.StopSoon()
		return
	}
	m := a.current
	a.current = nil
	err := a.fatal
	if err == nil {
		what := "forward"
		if _, ok := m.(*messages.Forward); !ok {
			what = "the embedder's code in " + requestName(m)
		}
		err = fmt.Errorf("%s: %w; the GPU actor goes on serving on a new thread", what, ErrStepExited)
		a.logger.Warn("runtime.Goexit on the GPU thread; a new GPU thread takes over", "err", err)
	}
	if f, ok := m.(messages.Failer); ok {
		a.publishTotals() // as answer does
		f.Fail(err)
		return
	}
	a.logger.Error("runtime.Goexit cut a request short that cannot be answered with an error; its caller waits for its context", "request", fmt.Sprintf("%T", m))
}

// requestName is the name of a request's type without its package
// ("AllocBatch"), for messages.
func requestName(m any) string {
	n := fmt.Sprintf("%T", m)
	return n[strings.LastIndex(n, ".")+1:]
}

// rebind runs on a fresh pinned thread that took over from one that
// runtime.Goexit ended (pinned.Dispatcher.OnTakeover): it makes the backend's
// context current on it (ThreadBinder). A failure makes the actor fatal:
// nothing may reach the backend from a thread without its context.
func (a *gpuActor) rebind() {
	b, ok := a.backend.(ThreadBinder)
	if !ok || a.fatal != nil {
		return
	}
	if err := a.guard("bind the new GPU thread", "", b.BindThread); err != nil {
		err = fmt.Errorf("a new GPU thread took over after runtime.Goexit, but %w", err)
		a.fatal = err
		a.status.setFatal(err)
		a.logger.Error("gpu worker: the new GPU thread has no context; the worker serves no more requests", "err", err)
	}
}

// start opens the backend and answers Start, whatever happens: a backend
// factory that calls runtime.Goexit is answered with the error guard
// recorded.
func (a *gpuActor) start() {
	a.ledger = newLedger()
	a.ops = &deviceHandle{a: a}
	a.dispatcher.OnTakeover(a.rebind)
	res := startResult{err: fmt.Errorf("open backend: %w: it called runtime.Goexit", ErrBackendPanic)}
	defer func() {
		if res.err != nil && a.fatal == nil {
			a.fatal = res.err
		}
		a.ready <- res
	}()
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
		res.err = err
		return
	}
	a.backend = b
	if a.utilization > 0 {
		if err := a.setBudget(); err != nil {
			res.err = err
			return
		}
	}
	var info DeviceInfo
	if err := a.guard("device info", "", func() error { info = b.Info(); return nil }); err != nil {
		res.err = err
		return
	}
	res = startResult{info: info, budget: a.budget}
}

// guard runs a backend call, turning a panic into ErrBackendPanic and marking
// the actor fatal: after a panic the backend's state is unknown, so the actor
// stops calling it (but still frees what the ledger holds when it stops).
// The error names op and, when not empty, the buffer label (joined only on
// a panic: guard runs on every backend call).
//
// A backend that calls runtime.Goexit is treated like one that panicked: the
// actor is marked fatal here, and escaped answers the request.
func (a *gpuActor) guard(op, label string, call func() error) (err error) {
	returned := false
	defer func() {
		r := recover()
		if r == nil && returned {
			return
		}
		if label != "" {
			op += " " + label
		}
		cause := fmt.Sprint(r)
		if r == nil {
			cause = "it called runtime.Goexit"
		}
		err = fmt.Errorf("%s: %w: %s", op, ErrBackendPanic, cause)
		a.fatal = err
		a.status.setFatal(err)
		a.logger.Error("backend panicked; the GPU worker serves no more requests", "op", op, "panic", cause)
	}()
	err = call()
	returned = true
	return err
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
func (a *gpuActor) guardFree(ptr device.DevicePtr) (err error) {
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
// other processes hold now, total − free (design.md §6), with arena.Budget:
// the same exact arithmetic as the preflight fit, so Worker.Budget equals
// arena.FitReport.ProcessBudgetBytes for the same device state. Errors: the
// backend's MemInfo error; an *arena.BudgetError joined with ErrOutOfMemory
// when other processes already hold the whole budget; an *arena.OptionError
// joined with ErrDriver when the backend reports free or total memory
// outside [0, total], total > 0.
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
	budget, err := arena.Budget(a.utilization, total, total-free)
	var noBudget *arena.BudgetError
	switch {
	case errors.As(err, &noBudget):
		return fmt.Errorf("%w: %w", ErrOutOfMemory, err)
	case err != nil:
		return fmt.Errorf("gpu_memory_utilization: the backend reports %d B free of %d B: %w: %w", free, total, ErrDriver, err)
	}
	a.budget = budget
	return nil
}
