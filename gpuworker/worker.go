package gpuworker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena/messages"
)

// Worker is the handle to a running GPU actor: its PID for other actors, and
// typed calls that send a request and wait for its reply, the caller's
// context, or the worker's stop, whichever comes first.
type Worker struct {
	system     *actor.ActorSystem
	pid        *actor.PID
	dispatcher *PinnedDispatcher
	info       DeviceInfo
	budget     int64
	mailbox    *pinnedMailbox
	status     *workerStatus // the actor's fatal error; closes exited when it has stopped
	// poller is held by the one caller polling for its reply now (see
	// PinnedDispatcher.polls): at most one holds a P that way.
	poller atomic.Bool

	closing  chan struct{} // closed when Stop starts: new requests get ErrClosed
	stopOnce sync.Once
}

// WorkerOption configures Start.
type WorkerOption func(*workerConfig)

type workerConfig struct {
	utilization float64
	throughput  int
	spin        time.Duration
	logger      *slog.Logger
}

// WithGPUMemoryUtilization caps what the worker may hold at once at the
// fraction f (0 < f ≤ 1) of the device's total memory, less what other
// processes held when the worker started (design.md §6):
//
//	budget = f × total − (total − free at start)
//
// An allocation past the budget fails with an *OutOfMemoryError whose
// OverBudget is true. 0 (the default) means no cap beyond the device's.
func WithGPUMemoryUtilization(f float64) WorkerOption {
	return func(c *workerConfig) { c.utilization = f }
}

// WithSpin sets how long the pinned thread polls for work before it parks,
// and a lone caller polls for its reply: it trades CPU for round trips
// without thread wake-ups. Default DefaultSpin; 0 turns polling off.
func WithSpin(d time.Duration) WorkerOption { return func(c *workerConfig) { c.spin = d } }

// WithThroughput sets the messages handled per scheduling (DefaultThroughput).
func WithThroughput(n int) WorkerOption { return func(c *workerConfig) { c.throughput = n } }

// WithLogger sets the logger for the worker's own messages (slog.Default()).
func WithLogger(l *slog.Logger) WorkerOption { return func(c *workerConfig) { c.logger = l } }

// Start starts the pinned thread, spawns the GPU actor on it and opens the
// backend there. It returns the backend's error (wrapped) when the backend
// cannot be opened, having stopped everything it started, and
// ErrInvalidValue for a negative budget.
//
// The GPU actor is spawned under a guardian whose directive is stop: it is
// never restarted, since a restart would drop its ledger and leak the device
// memory it holds (design.md §1).
func Start(system *actor.ActorSystem, factory BackendFactory, opts ...WorkerOption) (*Worker, error) {
	cfg := workerConfig{logger: slog.Default(), spin: DefaultSpin}
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
	if !(cfg.utilization >= 0 && cfg.utilization <= 1) {
		return nil, fmt.Errorf("gpu_memory_utilization %v: %w: want a fraction in (0, 1]", cfg.utilization, ErrInvalidValue)
	}
	if factory == nil {
		return nil, fmt.Errorf("gpu worker: %w: nil backend factory", ErrInvalidValue)
	}
	d := NewPinnedDispatcher(cfg.throughput, cfg.spin)
	ready := make(chan startResult, 1)
	status := newWorkerStatus()
	closing := make(chan struct{})
	a := &gpuActor{factory: factory, dispatcher: d, utilization: cfg.utilization, logger: cfg.logger, ready: ready, status: status, closing: closing}
	props := actor.PropsFromProducer(func() actor.Actor { return a },
		actor.WithDispatcher(d),
		actor.WithMailbox(pinnedMailboxProducer),
	)
	stopOnFailure := actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })
	// Copy: RootContext.WithGuardian sets the guardian on the context it is
	// called on, and system.Root is shared; without the copy every actor
	// spawned from system.Root afterwards would get this stop guardian too.
	pid := system.Root.Copy().WithGuardian(stopOnFailure).Spawn(props)
	w := &Worker{system: system, pid: pid, dispatcher: d, mailbox: d.mailbox.Load(), status: status, closing: closing}
	res := <-ready
	if res.err != nil {
		w.Stop()
		return nil, fmt.Errorf("start gpu worker: %w", res.err)
	}
	w.info, w.budget = res.info, res.budget
	return w, nil
}

// Expect readies the GPU thread for a request that will come within
// microseconds, through another actor: a parked GPU thread is woken now (its
// wake-up, tens of microseconds on a VM, then overlaps the hop through that
// actor) and it spins for the request rather than parking. It costs an atomic
// store when the thread is awake, and does nothing when callers do not poll
// (WithSpin(0), or GOMAXPROCS 1 as the GPU thread last read it: a spinning
// GPU thread would hold the only P).
func (w *Worker) Expect() {
	if w.dispatcher.polls() {
		w.dispatcher.expect()
	}
}

// Info describes the device the worker drives.
func (w *Worker) Info() DeviceInfo { return w.info }

// Budget is the most bytes the worker may hold at once (0: no cap beyond
// the device's); see WithGPUMemoryUtilization.
func (w *Worker) Budget() int64 { return w.budget }

// MailboxDepth is the number of messages waiting in the GPU actor's mailbox
// (for metrics; it may be stale by the time it is read).
func (w *Worker) MailboxDepth() int64 { return w.mailbox.waiting.Load() }

// Done is closed when the worker has stopped: its actor has freed what its
// ledger held and closed the backend, and its thread has exited.
func (w *Worker) Done() <-chan struct{} { return w.dispatcher.exited }

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
	case <-w.dispatcher.exited:
		return nil
	case <-w.status.abandoned:
	case <-ctxDone(ctx):
	}
	w.Abandon()
	select {
	case <-w.dispatcher.exited:
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
	return &StopError{HeldBytes: w.status.heldBytes.Load(), Cause: cause}
}

// StopResult waits for a worker whose stop has begun (StopContext) to
// finish, for as long as ctx allows: nil once Done is closed, a *StopError
// (errors.Is ctx's error) otherwise.
func (w *Worker) StopResult(ctx context.Context) error {
	select {
	case <-w.dispatcher.exited:
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

// ask sends msg to the GPU actor and waits for its reply; a caller alone in
// the mailbox polls for it while the GPU thread works (DefaultBusyPoll).
func ask[R any](ctx context.Context, w *Worker, msg any, reply <-chan R) (R, error) {
	return askBusy(ctx, w, msg, reply, DefaultBusyPoll)
}

// ctxDone is ctx.Done(), nil (never closed) for a nil ctx.
func ctxDone(ctx context.Context) <-chan struct{} {
	if ctx == nil {
		return nil
	}
	return ctx.Done()
}

// askBusy is ask with the busy poll busy (0: poll for the spin only).
//
// A caller that finds no request waiting in the GPU actor's mailbox polls
// for its reply (pollReply), holding its P, for the spin and for as long as
// the GPU thread is awake, up to busy; then it parks. It marks the dispatcher
// hot first, so that the GPU thread spins for the next request after this
// one rather than parking. Other callers, and every caller when polling is
// off (no spin, or GOMAXPROCS 1: the GPU thread needs a P of its own), park
// at once.
func askBusy[R any](ctx context.Context, w *Worker, msg any, reply <-chan R, busy time.Duration) (R, error) {
	if err := w.CheckCaller(); err != nil {
		var zero R
		return zero, err
	}
	select {
	case <-w.closing:
		var zero R
		return zero, ErrClosed
	default:
	}
	r, err := sendAndWait(ctx, w.status.gone, func() (R, bool) {
		if !w.dispatcher.polls() || w.mailbox.waiting.Load() != 0 || !w.poller.CompareAndSwap(false, true) {
			w.system.Root.Send(w.pid, msg)
			var zero R
			return zero, false
		}
		defer w.poller.Store(false)
		d := w.dispatcher
		d.hot.Store(true)
		w.system.Root.Send(w.pid, msg)
		return pollReply(reply, ctxDone(ctx), w.status.gone, d.spin, busy, d)
	}, reply)
	if errors.Is(err, ErrClosed) {
		if fatal := w.Err(); fatal != nil {
			err = fmt.Errorf("%w: %w", ErrClosed, fatal)
		}
	}
	return r, err
}

// CheckCaller returns ErrReentrant when called on the GPU thread, from inside
// a forward step, where waiting for the GPU actor would wait forever; nil
// anywhere else. Every call of the worker checks it; callers that wait for the
// worker through another actor check it first.
func (w *Worker) CheckCaller() error {
	if w.dispatcher.onPinnedThread() {
		return ErrReentrant
	}
	return nil
}

// Ping makes a round trip to the GPU thread without calling the backend
// (messages.Ping): nil when the worker serves requests.
func (w *Worker) Ping(ctx context.Context) error {
	reply := make(chan error, 1)
	r, err := ask(ctx, w, &messages.Ping{Ctx: ctx, Reply: reply}, reply)
	return errors.Join(err, r)
}

// Alloc allocates bytes bytes for owner, recorded as label.
func (w *Worker) Alloc(ctx context.Context, owner, label string, bytes int64) (messages.DevicePtr, error) {
	reply := make(chan messages.AllocReply, 1)
	r, err := ask(ctx, w, &messages.Alloc{Ctx: ctx, Owner: owner, Label: label, Bytes: bytes, Reply: reply}, reply)
	return r.Ptr, errors.Join(err, r.Err)
}

// AllocBatch allocates every item (for owner, unless the item names its
// own) or none, records their views, zero-fills their zero ranges and, when
// tag is not nil, tags the allocations with tag's result, in one request;
// see messages.AllocBatch. It returns one pointer per item, in order, and
// tag's result.
func (w *Worker) AllocBatch(ctx context.Context, owner string, items []messages.AllocItem, tag func([]messages.DevicePtr) any) ([]messages.DevicePtr, any, error) {
	reply := make(chan messages.AllocBatchReply, 1)
	r, err := ask(ctx, w, &messages.AllocBatch{Ctx: ctx, Owner: owner, Items: items, Tag: tag, Reply: reply}, reply)
	return r.Ptrs, r.Tag, errors.Join(err, r.Err)
}

// Free frees one allocation held by owner.
func (w *Worker) Free(ctx context.Context, owner string, ptr messages.DevicePtr) error {
	reply := make(chan error, 1)
	r, err := ask(ctx, w, &messages.Free{Ctx: ctx, Owner: owner, Ptr: ptr, Reply: reply}, reply)
	return errors.Join(err, r)
}

// FreeBatch frees every pointer held by owner, in order, in one request,
// keeping going after an error. It returns the pointers still held, in their
// order in ptrs, and the first error. When err is the context's or ErrClosed
// the request may have run or not: failed is then all of ptrs, and the
// ledger tells what is still held.
func (w *Worker) FreeBatch(ctx context.Context, owner string, ptrs []messages.DevicePtr) (failed []messages.DevicePtr, err error) {
	reply := make(chan messages.FreeBatchReply, 1)
	r, err := ask(ctx, w, &messages.FreeBatch{Ctx: ctx, Owner: owner, Ptrs: ptrs, Reply: reply}, reply)
	if err != nil {
		return ptrs, err
	}
	return r.Failed, r.Err
}

// FreeOwner frees everything owner holds, newest first.
func (w *Worker) FreeOwner(ctx context.Context, owner string) (messages.FreeOwnerReply, error) {
	reply := make(chan messages.FreeOwnerReply, 1)
	r, err := ask(ctx, w, &messages.FreeOwner{Ctx: ctx, Owner: owner, Reply: reply}, reply)
	return r, errors.Join(err, r.Err)
}

// Memset sets bytes bytes at ptr to value.
func (w *Worker) Memset(ctx context.Context, ptr messages.DevicePtr, value byte, bytes int64) error {
	reply := make(chan error, 1)
	r, err := ask(ctx, w, &messages.Memset{Ctx: ctx, Ptr: ptr, Value: value, Bytes: bytes, Reply: reply}, reply)
	return errors.Join(err, r)
}

// CopyHtoD copies src to dst.
func (w *Worker) CopyHtoD(ctx context.Context, dst messages.DevicePtr, src []byte) error {
	reply := make(chan error, 1)
	r, err := ask(ctx, w, &messages.CopyHtoD{Ctx: ctx, Dst: dst, Src: src, Reply: reply}, reply)
	return errors.Join(err, r)
}

// CopyDtoH reads bytes bytes at src.
func (w *Worker) CopyDtoH(ctx context.Context, src messages.DevicePtr, bytes int64) ([]byte, error) {
	reply := make(chan messages.CopyDtoHReply, 1)
	r, err := ask(ctx, w, &messages.CopyDtoH{Ctx: ctx, Src: src, Bytes: bytes, Reply: reply}, reply)
	return r.Data, errors.Join(err, r.Err)
}

// CopyDtoD copies bytes bytes from src to dst.
func (w *Worker) CopyDtoD(ctx context.Context, dst, src messages.DevicePtr, bytes int64) error {
	reply := make(chan error, 1)
	r, err := ask(ctx, w, &messages.CopyDtoD{Ctx: ctx, Dst: dst, Src: src, Bytes: bytes, Reply: reply}, reply)
	return errors.Join(err, r)
}

// MemInfo returns the device's free and total memory in bytes.
func (w *Worker) MemInfo(ctx context.Context) (freeBytes, totalBytes int64, err error) {
	reply := make(chan messages.MemInfoReply, 1)
	r, err := ask(ctx, w, &messages.MemInfo{Ctx: ctx, Reply: reply}, reply)
	return r.FreeBytes, r.TotalBytes, errors.Join(err, r.Err)
}

// Forward runs step on the GPU thread; see messages.Forward.
func (w *Worker) Forward(ctx context.Context, step func(messages.Device) error) (time.Duration, error) {
	reply := make(chan messages.ForwardReply, 1)
	// A step runs the embedder's code for an unknown time: poll for the
	// spin only.
	r, err := askBusy(ctx, w, &messages.Forward{Ctx: ctx, Step: step, Reply: reply}, reply, 0)
	return r.Duration, errors.Join(err, r.Err)
}

// Ledger returns a snapshot of the ledger.
func (w *Worker) Ledger(ctx context.Context) (messages.Ledger, error) {
	reply := make(chan messages.Ledger, 1)
	return ask(ctx, w, &messages.LedgerSnapshot{Reply: reply}, reply)
}

// Stats returns how the worker has run.
func (w *Worker) Stats(ctx context.Context) (messages.WorkerStats, error) {
	reply := make(chan messages.WorkerStats, 1)
	return ask(ctx, w, &messages.Stats{Reply: reply}, reply)
}
