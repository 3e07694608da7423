package gpuworker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker/internal/pinned"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// Worker is the handle to a running GPU actor: its PID for other actors, and
// typed calls that send a request and wait for its reply, the caller's
// context, or the worker's stop, whichever comes first.
type Worker struct {
	system     *actor.ActorSystem
	pid        *actor.PID
	dispatcher *pinned.Dispatcher
	info       DeviceInfo
	budget     int64
	status     *workerStatus // the actor's fatal error; closes gone when it has stopped

	closing  chan struct{} // closed when Stop starts: new requests get ErrClosed
	stopOnce sync.Once
}

// WorkerOption configures Start.
type WorkerOption func(*workerConfig)

type workerConfig struct {
	utilization    float64 // gpu_memory_utilization, as set (unset: the default)
	utilizationSet bool
	noBudget       bool // WithoutBudget
	throughput     int
	spin           time.Duration
	logger         *slog.Logger
}

// WithGPUMemoryUtilization caps what the worker may hold at once at the
// fraction f (0 < f ≤ 1) of the device's total memory, less what other
// processes held when the worker started (design.md §6), computed exactly
// by arena.Budget:
//
//	budget = ⌊f × total⌋ − (total − free at start)
//
// Unset, f is arena.DefaultGPUMemoryUtilization (0.90). An allocation past
// the budget fails with an *OutOfMemoryError whose OverBudget is true. Start
// returns an error (errors.Is ErrInvalidValue and arena.ErrInvalidOption,
// errors.As *arena.OptionError) for f outside (0, 1], 0 included, or with
// WithoutBudget; and one that is errors.Is ErrOutOfMemory and
// arena.ErrNoBudget when other processes already hold ⌊f × total⌋.
func WithGPUMemoryUtilization(f float64) WorkerOption {
	return func(c *workerConfig) { c.utilization, c.utilizationSet = f, true }
}

// WithoutBudget starts the worker with no budget: only the device refuses
// allocations, and Budget reports 0. It is for tests of a backend's own
// out-of-memory path (the conformance suite) and for an embedder that caps
// memory elsewhere; it excludes WithGPUMemoryUtilization.
func WithoutBudget() WorkerOption {
	return func(c *workerConfig) { c.noBudget = true }
}

// WithSpin sets how long the pinned thread polls for work before it parks,
// and a lone caller polls for its reply: it trades CPU for round trips
// without thread wake-ups. Default DefaultSpin; 0 turns polling off.
func WithSpin(d time.Duration) WorkerOption { return func(c *workerConfig) { c.spin = d } }

// WithThroughput sets the messages handled per scheduling (DefaultThroughput).
func WithThroughput(n int) WorkerOption { return func(c *workerConfig) { c.throughput = n } }

// WithLogger sets the logger for the worker's own messages; without it the
// worker logs nothing (a discard logger, never slog.Default).
func WithLogger(l *slog.Logger) WorkerOption { return func(c *workerConfig) { c.logger = l } }

// Start starts the pinned thread, spawns the GPU actor on it and opens the
// backend there. It returns the backend's error (wrapped) when the backend
// cannot be opened, having stopped everything it started; ErrInvalidValue
// for a bad option (see WithGPUMemoryUtilization for the budget's errors).
//
// The GPU actor is spawned under a guardian whose directive is stop: it is
// never restarted, since a restart would drop its ledger and leak the device
// memory it holds (design.md §1).
func Start(system *actor.ActorSystem, factory BackendFactory, opts ...WorkerOption) (*Worker, error) {
	cfg := workerConfig{logger: slog.New(slog.DiscardHandler), spin: DefaultSpin, utilization: arena.DefaultGPUMemoryUtilization}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("gpu worker: %w: option %d is nil", ErrInvalidValue, i+1)
		}
		o(&cfg)
	}
	if cfg.logger == nil {
		return nil, fmt.Errorf("gpu worker: %w: nil logger", ErrInvalidValue)
	}
	if cfg.spin < 0 {
		return nil, fmt.Errorf("gpu worker: spin %v: %w: must not be negative", cfg.spin, ErrInvalidValue)
	}
	if err := arena.ValidateGPUMemoryUtilization(cfg.utilization); err != nil {
		return nil, fmt.Errorf("gpu worker: %w: %w", ErrInvalidValue, err)
	}
	if cfg.noBudget && cfg.utilizationSet {
		return nil, fmt.Errorf("gpu worker: %w: WithoutBudget and WithGPUMemoryUtilization(%g) exclude each other; pass one", ErrInvalidValue, cfg.utilization)
	}
	utilization := cfg.utilization
	if cfg.noBudget {
		utilization = 0 // the actor's "no budget"
	}
	if factory == nil {
		return nil, fmt.Errorf("gpu worker: %w: nil backend factory", ErrInvalidValue)
	}
	d := pinned.New(cfg.throughput, cfg.spin)
	ready := make(chan startResult, 1)
	status := newWorkerStatus()
	closing := make(chan struct{})
	a := &gpuActor{factory: factory, dispatcher: d, utilization: utilization, logger: cfg.logger, ready: ready, status: status, closing: closing}
	props := actor.PropsFromProducer(func() actor.Actor { return a },
		actor.WithDispatcher(d),
		actor.WithMailbox(pinned.NewMailbox),
	)
	stopOnFailure := actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })
	// Copy: RootContext.WithGuardian sets the guardian on the context it is
	// called on, and system.Root is shared; without the copy every actor
	// spawned from system.Root afterwards would get this stop guardian too.
	pid := system.Root.Copy().WithGuardian(stopOnFailure).Spawn(props)
	w := &Worker{system: system, pid: pid, dispatcher: d, status: status, closing: closing}
	res := <-ready
	if res.err != nil {
		w.Stop()
		return nil, fmt.Errorf("start gpu worker: %w", res.err)
	}
	w.info, w.budget = res.info, res.budget
	return w, nil
}

// Info describes the device the worker drives.
func (w *Worker) Info() DeviceInfo { return w.info }

// Budget is the most bytes the worker may hold at once, as arena.Budget
// computed it when the worker started; 0 only with WithoutBudget. See
// WithGPUMemoryUtilization.
func (w *Worker) Budget() int64 { return w.budget }

// MailboxDepth is the number of messages waiting in the GPU actor's mailbox
// (for metrics; it may be stale by the time it is read).
func (w *Worker) MailboxDepth() int64 { return w.dispatcher.Queued() }

// Done is closed when the worker has stopped: its actor has freed what its
// ledger held and closed the backend, and its thread has exited.
func (w *Worker) Done() <-chan struct{} { return w.dispatcher.Done() }

// Err is nil while the worker serves requests. Once the backend has panicked
// (or called runtime.Goexit) it is that error (errors.Is ErrBackendPanic):
// the actor stops calling the backend and answers every request with it.
// Once a panic has escaped the GPU actor itself it is ErrActorPanic: the
// actor has stopped (never restarted, design.md §1) after freeing what its
// ledger held, and requests get ErrClosed joined with it. Stop still works,
// and is still needed, in both cases.
func (w *Worker) Err() error { return w.status.err() }

// Stop is StopContext without a deadline: it returns when the worker has
// stopped.
func (w *Worker) Stop() { _ = w.StopContext(context.Background()) }

// StopContext stops the worker. From the first call on, new requests get
// ErrClosed, and forward steps still in the mailbox are answered ErrClosed
// without being started; every other request already in the mailbox is
// answered. Then the actor frees everything its ledger still holds and
// closes the backend, on its thread, and the thread exits.
//
// It returns nil once all of that is done. When ctx is done first — in
// practice because a forward step that is running has not returned — it
// gives up waiting (Abandon) and returns a *StopError that says what the
// ledger still held: the worker then finishes on its own when the step
// returns, and Done is closed then. It is safe to call concurrently and more
// than once.
func (w *Worker) StopContext(ctx context.Context) error {
	w.stopOnce.Do(func() {
		close(w.closing)
		// Poison queues behind the requests already sent, so they are
		// answered; the actor's Stopped handler ends the thread.
		w.system.Root.Poison(w.pid)
	})
	select {
	case <-w.dispatcher.Done():
		return nil
	case <-w.status.abandoned:
	case <-ctxDone(ctx):
	}
	w.Abandon()
	select {
	case <-w.dispatcher.Done():
		return nil
	default:
		return w.stopError(ctx)
	}
}

// stopError is the error of a stop that gave up: ctx's error, or ErrClosed
// when another caller abandoned the wait.
func (w *Worker) stopError(ctx context.Context) *StopError {
	cause := ErrClosed
	if ctx != nil && ctx.Err() != nil {
		cause = ctx.Err()
	}
	return &StopError{HeldBytes: w.LedgerTotals().Counters.CurrentBytes, Cause: cause}
}

// StopResult waits for a worker whose stop has begun (StopContext) to
// finish, for as long as ctx allows: nil once Done is closed, a *StopError
// (errors.Is ctx's error) otherwise.
func (w *Worker) StopResult(ctx context.Context) error {
	select {
	case <-w.dispatcher.Done():
		return nil
	case <-ctxDone(ctx):
		return w.stopError(ctx)
	}
}

// Abandon stops waiting for the GPU thread: every caller waiting for a reply
// gets ErrClosed now, and so does every later request. Whatever the thread
// is doing (a forward step that does not return) it finishes on its own;
// after Stop it then frees the ledger and exits. Use it to shut down around
// a step that hangs; StopContext calls it when its context is done.
func (w *Worker) Abandon() { w.status.abandon() }

// Ping makes a round trip to the GPU thread without calling the backend:
// nil when the worker serves requests; the context's error when it was done
// before the actor got to it; the fatal error once the backend panicked.
func (w *Worker) Ping(ctx context.Context) error {
	r, err := pings.ask(ctx, w, messages.Ping{Ctx: ctx})
	return errors.Join(err, r)
}

// Alloc allocates bytes bytes for owner, recorded as label.
func (w *Worker) Alloc(ctx context.Context, owner, label string, bytes int64) (device.DevicePtr, error) {
	r, err := allocs.ask(ctx, w, messages.Alloc{Ctx: ctx, Owner: owner, Label: label, Bytes: bytes})
	return r.Ptr, errors.Join(err, r.Err)
}

// AllocBatch allocates every item (for owner, unless the item names its
// own) or none, records their views, zero-fills their zero ranges and, when
// tag is not nil, tags the allocations with tag's result, in one request;
// see messages.AllocBatch. It returns one pointer per item, in order, and
// tag's result.
//
// It is the arena supervisor's build (package actors), and the module's
// tests use it: its items are of gpuarena's internal package messages, so
// code outside the module cannot make a batch. An embedder builds an arena
// with the module root's Manager.BuildArena, or allocates with Alloc.
func (w *Worker) AllocBatch(ctx context.Context, owner string, items []messages.AllocItem, tag func([]device.DevicePtr) any) ([]device.DevicePtr, any, error) {
	r, err := allocBatches.ask(ctx, w, messages.AllocBatch{Ctx: ctx, Owner: owner, Items: items, Tag: tag})
	return r.Ptrs, r.Tag, errors.Join(err, r.Err)
}

// Free frees one allocation held by owner.
func (w *Worker) Free(ctx context.Context, owner string, ptr device.DevicePtr) error {
	r, err := frees.ask(ctx, w, messages.Free{Ctx: ctx, Owner: owner, Ptr: ptr})
	return errors.Join(err, r)
}

// FreeBatch frees every pointer held by owner, in order, in one request,
// keeping going after an error. It returns the pointers still held, in their
// order in ptrs, and the first error. When err is the context's or ErrClosed
// the request may have run or not: failed is then all of ptrs, and the
// ledger tells what is still held.
func (w *Worker) FreeBatch(ctx context.Context, owner string, ptrs []device.DevicePtr) (failed []device.DevicePtr, err error) {
	r, err := freeBatches.ask(ctx, w, messages.FreeBatch{Ctx: ctx, Owner: owner, Ptrs: ptrs})
	if err != nil {
		return ptrs, err
	}
	return r.Failed, r.Err
}

// FreeOwner frees everything owner holds, newest first, keeping going after
// an error. It returns how many allocations it freed, the bytes they held,
// and the first error.
func (w *Worker) FreeOwner(ctx context.Context, owner string) (freed int, bytes int64, err error) {
	r, err := freeOwners.ask(ctx, w, messages.FreeOwner{Ctx: ctx, Owner: owner})
	return r.Freed, r.Bytes, errors.Join(err, r.Err)
}

// Memset sets bytes bytes at ptr to value.
func (w *Worker) Memset(ctx context.Context, ptr device.DevicePtr, value byte, bytes int64) error {
	r, err := memsets.ask(ctx, w, messages.Memset{Ctx: ctx, Ptr: ptr, Value: value, Bytes: bytes})
	return errors.Join(err, r)
}

// CopyHtoD copies src to dst.
func (w *Worker) CopyHtoD(ctx context.Context, dst device.DevicePtr, src []byte) error {
	r, err := copiesHtoD.ask(ctx, w, messages.CopyHtoD{Ctx: ctx, Dst: dst, Src: src})
	return errors.Join(err, r)
}

// CopyDtoH reads bytes bytes at src.
func (w *Worker) CopyDtoH(ctx context.Context, src device.DevicePtr, bytes int64) ([]byte, error) {
	r, err := copiesDtoH.ask(ctx, w, messages.CopyDtoH{Ctx: ctx, Src: src, Bytes: bytes})
	return r.Data, errors.Join(err, r.Err)
}

// CopyDtoD copies bytes bytes from src to dst.
func (w *Worker) CopyDtoD(ctx context.Context, dst, src device.DevicePtr, bytes int64) error {
	r, err := copiesDtoD.ask(ctx, w, messages.CopyDtoD{Ctx: ctx, Dst: dst, Src: src, Bytes: bytes})
	return errors.Join(err, r)
}

// MemInfo returns the device's free and total memory in bytes.
func (w *Worker) MemInfo(ctx context.Context) (freeBytes, totalBytes int64, err error) {
	r, err := memInfos.ask(ctx, w, messages.MemInfo{Ctx: ctx})
	return r.FreeBytes, r.TotalBytes, errors.Join(err, r.Err)
}

// Forward runs step on the GPU thread with a device.Device handle that is
// valid only while step runs, from step's goroutine. The GPU actor's mailbox
// runs one request at a time, so two forward steps never overlap. It returns
// how long step ran and step's error (a panic in step is recovered as a
// *StepPanicError; runtime.Goexit in step gives ErrStepExited).
func (w *Worker) Forward(ctx context.Context, step func(device.Device) error) (time.Duration, error) {
	// A step runs the embedder's code for an unknown time: poll for the
	// spin only.
	r, err := forwards.ask(ctx, w, messages.Forward{Ctx: ctx, Step: step})
	return r.Duration, errors.Join(err, r.Err)
}

// QueueForward queues step behind the requests already in the GPU actor's
// mailbox and returns without waiting for it: the GPU thread runs it as
// Forward does, in the order steps were queued, one at a time, and sends
// its reply (the step's error and how long it ran; ErrClosed if the worker
// started to stop before it started) to reply, which must have room for
// one. A supervisor that forwards steps this way leaves its own mailbox
// free, and the next step is already queued when one ends. A caller waits
// for reply or Gone: a worker that stops for good may leave a queued step
// unanswered. Errors, with nothing queued: ErrReentrant from inside a
// forward step, ErrClosed once the worker started to stop.
func (w *Worker) QueueForward(ctx context.Context, step func(device.Device) error, reply chan<- messages.ForwardReply) error {
	if err := w.admit(); err != nil {
		return err
	}
	w.system.Root.Send(w.pid, &messages.Forward{Ctx: ctx, Step: step, Reply: reply})
	return nil
}

// Gone is closed once no reply is to be waited for from the worker: its
// thread has exited, or a stop gave up on it (Abandon).
func (w *Worker) Gone() <-chan struct{} { return w.status.gone }

// Ledger returns a snapshot of the ledger.
func (w *Worker) Ledger(ctx context.Context) (device.Ledger, error) {
	return ledgerSnapshots.ask(ctx, w, messages.LedgerSnapshot{})
}

// Stats returns how the worker has run.
func (w *Worker) Stats(ctx context.Context) (device.Stats, error) {
	return statsRequests.ask(ctx, w, messages.Stats{})
}
