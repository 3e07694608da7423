package gpuarena

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
)

// BuildArenas builds rank r's arena from plans[r] on every rank at once
// (Manager.BuildArena, each on its own GPU thread): one plan per rank,
// whatever made them (the same plan on every rank, or per-rank sizing).
// It is all or nothing across ranks: when any rank's build fails, the
// arenas of the ranks that built are released (their arena and slabs
// only: weights, KV cache and the embedder's allocations stay), so no rank
// holds arena bytes, and the error names every failed rank (*RankError,
// joined in rank order; an *gpuworker.OutOfMemoryError inside names the
// buffer). The group's arena is then retired like a released one: later
// builds get ErrReleased on every rank until Reset.
//
// Errors, with nothing built on any rank: ErrInvalidValue for a plan count
// other than Ranks or a nil plan (naming the rank); ErrReleased after a
// rollback or Release, until Reset; and each rank's BuildArena errors in *RankErrors.
func (g *Group) BuildArenas(ctx context.Context, plans []*arena.Plan) ([]*device.Arena, error) {
	if len(plans) != len(g.ranks) {
		return nil, fmt.Errorf("group build arena: %w: %d plans for %d ranks; pass one plan per rank", ErrInvalidValue, len(plans), len(g.ranks))
	}
	for r, p := range plans {
		if p == nil {
			return nil, g.rankError("build arena", r, fmt.Errorf("%w: nil plan", ErrInvalidValue))
		}
	}
	if g.arenaRetired.Load() {
		return nil, fmt.Errorf("group build arena: %w: the group's arenas were released or a build was rolled back; call Reset to build again", ErrReleased)
	}
	arenas := make([]*device.Arena, len(g.ranks))
	err := g.each("build arena", func(r int, m *Manager) error {
		a, err := m.BuildArena(ctx, plans[r])
		arenas[r] = a
		return err
	})
	if err == nil {
		return arenas, nil
	}
	g.arenaRetired.Store(true)
	rollback := g.each("roll back arena", func(r int, m *Manager) error {
		if arenas[r] == nil {
			return nil
		}
		_, err := m.sup.Release(context.Background())
		return err
	})
	if rollback == nil {
		g.logger.Warn("gpuarena: group build failed; every rank's arena rolled back", "err", err)
	}
	return nil, errors.Join(err, rollback)
}

// LoadWeights loads rank r's weights from paths[r] on every rank at once
// (Manager.LoadWeights with opts, each rank from its own path: a
// checkpoint per rank, such as the shards a tensor-parallel export
// writes). It is all or nothing across ranks: when any rank's load fails,
// the weights the other ranks loaded are freed, and the error names every
// failed rank (*RankError, joined in rank order). A WithLoadProgress
// callback is called by every rank's load, concurrently: it must be safe
// for that.
//
// Errors, with no weights on any rank: ErrInvalidValue for a path count
// other than Ranks; each rank's LoadWeights errors in *RankErrors.
func (g *Group) LoadWeights(ctx context.Context, paths []string, opts ...LoadOption) ([]*device.Weights, error) {
	if len(paths) != len(g.ranks) {
		return nil, fmt.Errorf("group load weights: %w: %d paths for %d ranks; pass one checkpoint per rank", ErrInvalidValue, len(paths), len(g.ranks))
	}
	ws := make([]*device.Weights, len(g.ranks))
	err := g.each("load weights", func(r int, m *Manager) error {
		w, err := m.LoadWeights(ctx, paths[r], opts...)
		ws[r] = w
		return err
	})
	if err == nil {
		return ws, nil
	}
	return nil, g.rollBackWeights(ws, err)
}

// rollBackWeights frees the weights of every rank that loaded some (ws[r]
// not nil), after a load that failed with err on another, and returns err
// joined with the rollback's errors: a group's loads are all or nothing.
func (g *Group) rollBackWeights(ws []*device.Weights, err error) error {
	rollback := g.each("roll back weights", func(r int, m *Manager) error {
		if ws[r] == nil {
			return nil
		}
		_, _, err := m.worker.FreeOwner(context.Background(), device.WeightsOwner)
		return err
	})
	return errors.Join(err, rollback)
}

// Release releases every rank at once (Manager.Release: the arena, slabs,
// weights, KV cache and the embedder's allocations) and returns each
// rank's report, by rank. Every rank is released whatever the others
// return; the errors are *RankErrors joined in rank order (ErrNoArena from
// a rank with no arena among them). Later builds get ErrReleased, until
// Reset.
func (g *Group) Release(ctx context.Context) ([]device.ReleaseReport, error) {
	if err := g.checkCaller(); err != nil {
		return nil, err
	}
	g.arenaRetired.Store(true)
	reps := make([]device.ReleaseReport, len(g.ranks))
	err := g.each("release", func(r int, m *Manager) error {
		rep, err := m.Release(ctx)
		reps[r] = rep
		return err
	})
	return reps, err
}

// Reset makes a released group build again: Manager.Reset on every rank at
// once (a rank with no arena, such as one whose part of a rolled-back build
// failed, has nothing to reset), then BuildArenas builds. When any rank
// cannot reset the group keeps refusing builds. Errors: *RankErrors in
// rank order wrapping Manager.Reset's (ErrNotReleased for a rank whose
// arena is built and not released, or whose release left part of it);
// ErrReentrant.
func (g *Group) Reset(ctx context.Context) error {
	if err := g.checkCaller(); err != nil {
		return err
	}
	err := g.each("reset", func(_ int, m *Manager) error { return m.Reset(ctx) })
	if err == nil {
		g.arenaRetired.Store(false)
	}
	return err
}
