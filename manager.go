package gpuarena

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuarena/gpuarena/actors"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// Manager owns one device through one GPU actor and its supervisors. Its
// methods are safe for concurrent use; forward steps run one at a time.
//
// A call from inside a forward step gets ErrReentrant: the worker's calls
// and the supervisors' (gpuworker.AskVia) check their caller before they
// send anything, so a method that only hands on to one of them does not
// check again; those that do work of their own first (Release, LoadWeights,
// Preflight, CloseContext) check first.
type Manager struct {
	system *actor.ActorSystem
	worker *gpuworker.Worker
	sup    *actors.Supervisors
	logger *slog.Logger
	layout device.Layout
	// utilization is gpu_memory_utilization, as New was given it.
	utilization float64
	// forwardHist observes every forward step that ran (see Collector).
	forwardHist prometheus.Histogram
	// arenaPlan is the plan of the arena BuildArena built, nil before;
	// BuildKVCache checks a spec's model against it.
	arenaPlan atomic.Pointer[arena.Plan]
	// kv is the KV cache supervisor: its mailbox serialises the KV cache's
	// builds and every change to its block pool.
	kv *actors.KV

	closeOnce sync.Once
	closeDone chan struct{} // closed when close has run
	closeErr  error         // close's result, set before closeDone is closed
}

// New starts the GPU actor on its own locked OS thread, opens the backend
// there, and starts the supervisors. Errors: an *arena.OptionError
// (errors.Is ErrInvalidOption) naming a bad option, the backend's error (ErrBackendNotBuiltIn, gpuworker.ErrNoDevice, …)
// when it cannot be opened; nothing is left running on error.
func New(opts ...Option) (*Manager, error) {
	cfg := defaultConfig()
	for i, o := range opts {
		if o == nil {
			return nil, &arena.OptionError{Option: "options", Value: i + 1, Reason: "option is nil"}
		}
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	quiet := slog.New(minLevelHandler{cfg.logger.Handler(), slog.LevelWarn}).With("lib", "protoactor")
	system := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }),
		// A dead letter's throttle keeps a goroutine for this long; keep it short
		// so Close leaves no goroutine behind for long.
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond),
	)
	worker, err := gpuworker.Start(system, cfg.backend,
		gpuworker.WithGPUMemoryUtilization(cfg.utilization),
		gpuworker.WithSpin(cfg.spin),
		gpuworker.WithLogger(cfg.logger),
	)
	if err != nil {
		system.Shutdown()
		return nil, err
	}
	sup := actors.Spawn(system, worker, actors.WithLogger(cfg.logger))
	m := &Manager{system: system, worker: worker, sup: sup, kv: actors.SpawnKV(system, cfg.logger), logger: cfg.logger, layout: cfg.layout, utilization: cfg.utilization, forwardHist: newForwardHistogram(),
		closeDone: make(chan struct{})}
	info := worker.Info()
	cfg.logger.Info("gpuarena: device opened", "backend", info.Backend, "device", info.Name,
		"total_bytes", info.TotalBytes, "budget_bytes", worker.Budget())
	return m, nil
}

// Device describes the device: its backend, ordinal, name, memory in bytes
// and compute capability.
func (m *Manager) Device() gpuworker.DeviceInfo { return m.worker.Info() }

// Budget is the most bytes this process may hold: ⌊gpu_memory_utilization ×
// total⌋ less what other processes held at New, computed by arena.Budget,
// so it equals arena.FitReport.ProcessBudgetBytes for that device state.
func (m *Manager) Budget() int64 { return m.worker.Budget() }

// MemInfo returns the device's free and total memory in bytes (cuMemGetInfo).
func (m *Manager) MemInfo(ctx context.Context) (freeBytes, totalBytes int64, err error) {
	return m.worker.MemInfo(ctx)
}

// BuildArena allocates every present buffer of plan — as one pool (the
// default layout) or one allocation per buffer
// (WithArenaLayout(device.LayoutDiscrete)) — and every slab of the plan, and zero-fills the buffers that must read
// as zeros (arena.BufferID.ZeroFill), all or nothing: a
// failure at any allocation frees the ones before it. Once the allocation has started it runs to
// its end even if ctx is cancelled, and what it built is released by Release
// or Close. Errors: ErrArenaBuilt, ErrReleased, ErrClosed, an
// *gpuworker.OutOfMemoryError (errors.Is ErrOutOfMemory).
func (m *Manager) BuildArena(ctx context.Context, plan *arena.Plan) (*device.Arena, error) {
	a, err := m.sup.BuildArena(ctx, plan, m.layout)
	if err != nil {
		return nil, err
	}
	m.arenaPlan.Store(plan)
	m.logger.Info("gpuarena: arena built", "model_type", plan.ModelType, "bytes", plan.TotalBytes, "slabs", len(plan.Slabs))
	return a, nil
}

// Forward runs one forward step on the GPU thread. Steps run one at a time,
// in the order they arrive; step gets the arena and a device handle valid only
// while it runs, on its own goroutine (the Device refuses calls from any
// other, ErrNotGPUThread), and must use nothing else of the manager (a
// Manager call from inside a step returns ErrReentrant). ctx bounds the wait
// until the step starts: a step whose ctx is done before then never starts,
// and Forward returns the context's error. Once started, a step runs to its
// end and Forward waits for it whatever ctx says, since the step may use the
// caller's memory; bound a step's own time inside it, and use CloseContext
// to give up on one that hangs. It returns how long the step ran. Errors:
// ErrNoArena, ErrReleased, ErrClosed, ErrReentrant, ErrStepPanic (a
// *gpuworker.StepPanicError with the stack), ErrStepExited (the step called
// runtime.Goexit; the manager keeps serving), the context's, and the step's
// own.
func (m *Manager) Forward(ctx context.Context, step func(a *device.Arena, dev device.Device) error) (time.Duration, error) {
	q, err := m.QueueForward(ctx, step)
	if err != nil {
		return 0, err
	}
	return q.Wait()
}

// QueueForward queues a forward step and returns without waiting for it;
// Wait waits for it and returns what Forward would. Steps run one at a
// time, in the order they are queued (from one goroutine: the order of its
// calls), and a step queued while another runs starts the moment that one
// ends: a server schedules and queues step N+1 while step N runs, as vLLM's
// async scheduling does, and the GPU thread goes from one step to the next
// without waiting for it (examples/server). The step's rules are
// Forward's; ctx bounds the wait until the step starts, a step still
// queued when Close starts does not start. Errors, with nothing queued: a
// nil step (ErrInvalidValue), the context's, ErrClosed, ErrReentrant; the
// others come from Wait.
func (m *Manager) QueueForward(ctx context.Context, step func(a *device.Arena, dev device.Device) error) (*QueuedStep, error) {
	if step != nil {
		run := step
		step = func(a *device.Arena, dev device.Device) error {
			start := time.Now()
			defer func() { m.forwardHist.Observe(time.Since(start).Seconds()) }()
			return run(a, dev)
		}
	}
	return m.sup.QueueForward(ctx, step)
}

// QueuedStep is a forward step Manager.QueueForward queued: its Wait waits
// for the step and returns how long it ran and its error, as Forward does;
// later calls return the first one's result.
type QueuedStep = actors.QueuedStep

// CarveSlab carves the next bytes bytes (256-byte aligned) from the slab
// name, bump-only, and returns the region's pointer and offset in the slab.
// Errors: ErrSlabAbsent (names the slabs there are), ErrSlabExhausted
// (names asked, used and capacity), ErrInvalidCarve (a size ≤ 0),
// ErrReleased, ErrClosed, ErrReentrant.
func (m *Manager) CarveSlab(ctx context.Context, name string, bytes int64) (device.DevicePtr, int64, error) {
	return m.sup.CarveSlab(ctx, name, bytes, 0)
}

// Ledger returns a snapshot of every live allocation (label, owner, bytes,
// pointer, age) and the counters (current, peak, allocations, frees, failures).
func (m *Manager) Ledger(ctx context.Context) (device.Ledger, error) { return m.worker.Ledger(ctx) }

// Stats returns how the GPU worker has run.
func (m *Manager) Stats(ctx context.Context) (device.Stats, error) { return m.worker.Stats(ctx) }

// Release frees the arena and the slabs, then everything else the ledger
// holds: the weights (device.WeightsOwner), the KV cache
// (device.KVCacheOwner) and the embedder's own allocations (Alloc), owner
// by owner. It is exhaustive (it walks the buffer table, then every owner
// in the ledger), idempotent (a second call frees
// nothing twice), and it keeps going after an error, returning the first.
// Later forward steps, carves and builds get ErrReleased, until Reset; Alloc,
// LoadWeights and BuildKVCache still work, and Close frees what they make.
// Before any arena was built it frees the other owners, reports
// them, and returns ErrNoArena; the manager can still build one. ctx bounds
// only the wait for the arena's part: once started, a release runs to its
// end, and the other owners are then freed (and waited for) whatever ctx
// says.
func (m *Manager) Release(ctx context.Context) (device.ReleaseReport, error) {
	if err := m.worker.CheckCaller(); err != nil {
		return device.ReleaseReport{}, err
	}
	r, err := m.release(ctx)
	if err == nil {
		m.logger.Info("gpuarena: released", "allocations", r.Freed, "bytes", r.Bytes, "duration", r.Duration)
	}
	return r, err
}

// Reset makes a released manager build again: after Release has freed
// everything, the arena's supervisors forget the released arena and its
// slabs, and BuildArena builds a new one (a server that swaps the model it
// serves, or a node that deploys again on the same device, without a new
// manager). Until that build, forward steps get ErrNoArena, not
// ErrReleased. Weights, the KV cache and the embedder's allocations are not
// its business: Release freed them and LoadWeights, BuildKVCache and Alloc
// work after it anyway. With no arena, built or released (a new manager,
// or one reset already), it does nothing. Errors: ErrNotReleased when the
// arena is built and not released, or Release left allocations of it live
// (the message says how many); the context's error; ErrSupervisorStopped;
// ErrClosed; ErrReentrant.
func (m *Manager) Reset(ctx context.Context) error {
	if err := m.worker.CheckCaller(); err != nil {
		return err
	}
	if err := m.sup.Reset(ctx); err != nil {
		return err
	}
	m.logger.Info("gpuarena: reset after release")
	return nil
}

// Err is nil while the manager serves requests. After the backend panicked
// (errors.Is ErrBackendPanic), or a panic escaped the GPU actor, which then
// stopped (ErrActorPanic), it is that fatal error: every later request fails
// with it (or with ErrClosed joined with it), and Close still frees
// everything the ledger holds.
func (m *Manager) Err() error { return m.worker.Err() }

// Close is CloseContext with no deadline: it returns when everything is
// freed and every goroutine the manager started has exited.
func (m *Manager) Close() error { return m.CloseContext(context.Background()) }

// CloseContext releases everything, stops the supervisors, the GPU actor
// (which frees whatever its ledger still holds, on its own thread) and its
// thread, and shuts the actor system down. It is idempotent (later calls
// return the first result once it is known), safe to call concurrently, and
// logs how long it took at info level.
//
// Forward steps, builds and carves that have not started when it begins —
// queued behind a running step, or arriving later — are not started: they
// get ErrClosed. Other requests in flight each complete or fail with
// ErrClosed; nothing they allocated outlives the close.
//
// It waits for a forward step that is running to return, for as long as ctx
// allows. When ctx is done first, it stops waiting: every caller still
// waiting on the manager gets ErrClosed, the supervisors and the actor
// system stop, and it returns a *gpuworker.StopError (errors.Is ErrClosed
// and ctx's error) that says how many bytes the ledger still holds. Those are
// freed by the GPU thread, which then exits, when the step returns; Done is
// closed then, and a later Close or CloseContext waits for it and returns
// nil. Called from inside a step, it returns ErrReentrant and closes nothing.
func (m *Manager) CloseContext(ctx context.Context) error {
	if err := m.worker.CheckCaller(); err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	m.closeOnce.Do(func() {
		m.sup.Drain()
		m.logger.Info("gpuarena: closing; forward steps, builds and carves not yet started will not start")
		go m.close()
	})
	select {
	case <-m.closeDone:
	case <-ctx.Done():
		// Every wait on the GPU thread ends now, so close finishes without it.
		m.worker.Abandon()
		<-m.closeDone
	}
	if err := m.worker.StopResult(ctx); err != nil {
		return err
	}
	return m.closeErr
}

// Done is closed when the manager has closed and its GPU thread has freed
// everything and exited: after Close returns nil, or later, when a
// CloseContext gave up waiting for a forward step that then returned.
func (m *Manager) Done() <-chan struct{} { return m.worker.Done() }

// close releases, then stops the supervisors, the worker and the actor
// system; after Worker.Abandon each of these returns without waiting for the
// GPU thread.
func (m *Manager) close() {
	defer close(m.closeDone)
	start := time.Now()
	_, err := m.release(context.Background())
	m.kv.Stop()
	m.sup.Stop()
	werr := m.worker.StopContext(context.Background())
	m.system.Shutdown()
	if (errors.Is(err, ErrClosed) && m.worker.Err() == nil) || errors.Is(err, ErrNoArena) {
		err = nil
	}
	m.closeErr = err
	m.logger.Info("gpuarena: closed", "duration", time.Since(start), "err", err, "gpu_thread", werr)
}
