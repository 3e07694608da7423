package gpuarena

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// Group drives several devices of one host, one rank per device: each rank
// is a Manager of its own (its GPU actor on its own locked OS thread with
// its own context, its supervisors, ledger, budget and KV supervisor), and
// the group runs forward steps on every rank at once, in the same order on
// every rank (Forward). Its methods are safe for concurrent use.
//
// Per-rank work the group does not cover (Alloc, the KV cache, carves,
// Preflight) goes to Rank(r). A rank's own Forward runs outside the
// group's order; steps that must be in lockstep go through Group.Forward.
type Group struct {
	ranks  []*Manager
	logger *slog.Logger
	spin   int64 // the ranks' dispatcher spin, in ns (GroupSpin)

	// step holds a token while a group forward step runs: one at a time.
	step chan struct{}
	// arenaRetired is set once a group build was rolled back or the group
	// released: the rolled-back ranks refuse builds (ErrReleased), so the
	// group refuses them on every rank, until Reset clears it.
	arenaRetired atomic.Bool

	closing   chan struct{} // closed when Close starts: queued steps get ErrClosed
	closeOnce sync.Once
	closeDone chan struct{}
	closeErr  error
}

// NewGroup starts one rank per device (WithDevices, WithDeviceFactories),
// rank r on the r-th, all at once: each its own GPU actor on its own locked
// OS thread, its backend opened there (on cuda the device's primary
// context), its supervisors above it, with the options of WithRankOptions
// and the dispatcher spin of GroupSpin(ranks, GOMAXPROCS) unless
// WithGroupSpin says otherwise.
//
// It is all or nothing: when a rank cannot start, every rank that did is
// closed, and the error is a *RankError naming the rank and device, joined
// with those of any other rank that failed. Errors: an *arena.OptionError
// (errors.Is ErrInvalidOption) for no device, more than
// gpuworker.MaxMachineDevices, a nil factory or option, a negative spin, or
// a rank option New refuses; the backend's (ErrBackendNotBuiltIn,
// gpuworker.ErrNoDevice, …) in a *RankError.
func NewGroup(opts ...GroupOption) (*Group, error) {
	var cfg groupConfig
	for i, o := range opts {
		if o == nil {
			return nil, &arena.OptionError{Option: "group options", Value: i + 1, Reason: "option is nil"}
		}
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	spin := GroupSpin(len(cfg.factories), runtime.GOMAXPROCS(0))
	if cfg.spinSet {
		spin = cfg.spin
	}
	rc := defaultConfig()
	for _, o := range cfg.rankOpts {
		o(&rc)
	}
	g := &Group{ranks: make([]*Manager, len(cfg.factories)), logger: rc.logger, spin: int64(spin),
		step: make(chan struct{}, 1), closing: make(chan struct{}), closeDone: make(chan struct{})}
	errs := make([]error, len(g.ranks))
	var wg sync.WaitGroup
	for r, f := range cfg.factories {
		wg.Go(func() {
			ropts := append(append([]Option(nil), cfg.rankOpts...), WithBackendFactory(f), WithDispatcherSpin(spin))
			m, err := New(ropts...)
			if err != nil {
				errs[r] = &RankError{Rank: r, Op: "start", Err: err}
				return
			}
			g.ranks[r] = m
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, m := range g.ranks {
			if m != nil {
				err = errors.Join(err, m.Close())
			}
		}
		var oe *arena.OptionError
		if errors.As(err, &oe) {
			return nil, oe // the same bad option on every rank: say it once
		}
		return nil, err
	}
	g.logger.Info("gpuarena: group opened", "ranks", len(g.ranks), "spin", spin)
	return g, nil
}

// Ranks is the number of ranks, one per device.
func (g *Group) Ranks() int { return len(g.ranks) }

// Rank returns rank r's manager (0 ≤ r < Ranks), for the per-rank calls the
// group does not make itself. Closing it closes that rank only; the group's
// Close closes every rank.
func (g *Group) Rank(r int) *Manager { return g.ranks[r] }

// Devices describes each rank's device, by rank.
func (g *Group) Devices() []gpuworker.DeviceInfo {
	out := make([]gpuworker.DeviceInfo, len(g.ranks))
	for r, m := range g.ranks {
		out[r] = m.Device()
	}
	return out
}

// Budgets are the ranks' budgets in bytes, by rank (Manager.Budget: each
// device's gpu_memory_utilization × total less what others held at start).
func (g *Group) Budgets() []int64 {
	out := make([]int64, len(g.ranks))
	for r, m := range g.ranks {
		out[r] = m.Budget()
	}
	return out
}

// checkCaller returns ErrReentrant when called from inside a forward step
// of any rank (on a rank's GPU thread), where waiting for the group would
// wait for itself.
func (g *Group) checkCaller() error {
	for _, m := range g.ranks {
		if err := m.worker.CheckCaller(); err != nil {
			return err
		}
	}
	return nil
}

// each runs fn for every rank at once, rank 0 on the caller's goroutine,
// and returns when all have returned: the errors, each in a *RankError
// naming op, the rank and its device, joined in rank order.
func (g *Group) each(op string, fn func(r int, m *Manager) error) error {
	errs := make([]error, len(g.ranks))
	run := func(r int) {
		if err := fn(r, g.ranks[r]); err != nil {
			errs[r] = g.rankError(op, r, err)
		}
	}
	var wg sync.WaitGroup
	for r := 1; r < len(g.ranks); r++ {
		wg.Go(func() { run(r) })
	}
	run(0)
	wg.Wait()
	return errors.Join(errs...)
}

// Close is CloseContext with no deadline.
func (g *Group) Close() error { return g.CloseContext(context.Background()) }

// CloseContext closes every rank at once (Manager.CloseContext: release,
// supervisors, GPU actor, thread), after refusing group steps not yet
// started (ErrClosed). It is idempotent and safe to call concurrently; a
// later call returns the first one's result. ctx bounds the wait for steps
// that are running, as in Manager.CloseContext; the errors are *RankErrors
// joined in rank order. Called from inside a step it returns ErrReentrant
// and closes nothing.
func (g *Group) CloseContext(ctx context.Context) error {
	if err := g.checkCaller(); err != nil {
		return err
	}
	g.closeOnce.Do(func() {
		close(g.closing)
		g.closeErr = g.each("close", func(_ int, m *Manager) error { return m.CloseContext(ctx) })
		g.logger.Info("gpuarena: group closed", "ranks", len(g.ranks), "err", g.closeErr)
		close(g.closeDone)
	})
	<-g.closeDone
	return g.closeErr
}
