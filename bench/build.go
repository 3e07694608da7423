package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/messages"
)

// BuildSample is the durations of n build-and-release cycles.
type BuildSample struct {
	Build, Release []time.Duration
}

func newBuildSample(n int) BuildSample {
	return BuildSample{Build: make([]time.Duration, 0, n), Release: make([]time.Duration, 0, n)}
}

// Summaries summarises the builds and the releases; each one's wall time is
// the sum of its durations (the cycles run one after another).
func (s BuildSample) Summaries() (build, release Summary) {
	return Summarize(s.Build, sum(s.Build)), Summarize(s.Release, sum(s.Release))
}

func sum(d []time.Duration) time.Duration {
	var t time.Duration
	for _, x := range d {
		t += x
	}
	return t
}

// ActorBuild builds plan's arena through a gpuarena.Manager (BuildArena,
// then Release) on a backend made by Factory. A Manager's arena cannot be
// rebuilt after Release, so each cycle starts a Manager and closes it,
// untimed, and makes a round trip to its GPU thread and supervisors before
// the clock starts, so that their start-up is not counted as building.
type ActorBuild struct {
	Factory gpuworker.BackendFactory
	Plan    *arena.Plan
	Layout  gpuarena.Layout
	Spin    time.Duration
}

// Cycle makes one timed build and release and appends their durations to s.
func (a ActorBuild) Cycle(s *BuildSample) error {
	m, err := gpuarena.New(gpuarena.WithBackendFactory(a.Factory), gpuarena.WithArenaLayout(a.Layout),
		gpuarena.WithDispatcherSpin(a.Spin), gpuarena.WithLogger(quiet))
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := warmManager(ctx, m); err != nil {
		return errors.Join(err, m.Close())
	}
	// Starting an actor system leaves garbage (protoactor-go's process
	// registry allocates ~1,000 shard maps); collect it now, or the build
	// pays for it in GC assists that a server building once never sees.
	settle()
	t0 := time.Now()
	_, err = m.BuildArena(ctx, a.Plan)
	t1 := time.Now()
	if err == nil {
		_, err = m.Release(ctx)
	}
	t2 := time.Now()
	if err == nil {
		s.Build, s.Release = append(s.Build, t1.Sub(t0)), append(s.Release, t2.Sub(t1))
	}
	return errors.Join(err, m.Close())
}

// warmManager makes one round trip to m's GPU thread and one to each of the
// arena and slab supervisors (requests they refuse, since there is no arena
// yet), so that their start-up is done before the clock starts.
func warmManager(ctx context.Context, m *gpuarena.Manager) error {
	if _, _, err := m.MemInfo(ctx); err != nil {
		return err
	}
	if _, err := m.Forward(ctx, func(*gpuarena.Arena, gpuarena.Device) error { return nil }); !errors.Is(err, gpuarena.ErrNoArena) {
		return fmt.Errorf("warm-up forward step: %v, want %v", err, gpuarena.ErrNoArena)
	}
	if _, _, err := m.CarveSlab(ctx, arena.SlabSSMRowwiseW, 1); err == nil {
		return errors.New("warm-up carve: carved a slab before the arena was built")
	}
	return nil
}

// DirectBuild makes the driver calls of BuildArena for plan with layout —
// one Alloc for the pool or one per present buffer, one per slab, the
// zero-fill of norm_unit_w — and of Release (a Free per allocation, newest
// first), straight on the backend. Call it on the backend's locked thread.
type DirectBuild struct {
	Plan   *arena.Plan
	Layout gpuarena.Layout
	sizes  []int64 // the allocations, in order
	norm   int     // index in sizes of the allocation holding norm_unit_w (-1: none)
	offset int64   // norm_unit_w's offset in it
}

// NewDirectBuild lays plan out as BuildArena would with layout.
func NewDirectBuild(plan *arena.Plan, layout gpuarena.Layout) (*DirectBuild, error) {
	d := &DirectBuild{Plan: plan, Layout: layout, norm: -1}
	switch layout {
	case gpuarena.LayoutPooled:
		pool, err := arena.NewPoolLayout(plan)
		if err != nil {
			return nil, err
		}
		d.sizes = append(d.sizes, pool.Bytes)
		if off := pool.Offsets[arena.NormUnitW]; off >= 0 {
			d.norm, d.offset = 0, off
		}
	case gpuarena.LayoutDiscrete:
		for _, id := range arena.BufferIDs() {
			if b := plan.Buffers[id]; b.Present() {
				if id == arena.NormUnitW {
					d.norm = len(d.sizes)
				}
				d.sizes = append(d.sizes, b.Bytes)
			}
		}
	default:
		return nil, fmt.Errorf("bench: layout %q: want %q or %q", layout, gpuarena.LayoutPooled, gpuarena.LayoutDiscrete)
	}
	for _, s := range plan.Slabs {
		d.sizes = append(d.sizes, s.Bytes)
	}
	return d, nil
}

// Allocations is the number of driver allocations one build makes.
func (d *DirectBuild) Allocations() int { return len(d.sizes) }

// Cycle makes one timed build and release on b and appends their durations
// to s. On an error it frees what it allocated.
func (d *DirectBuild) Cycle(b gpuworker.Backend, s *BuildSample, ptrs []messages.DevicePtr) error {
	ptrs = ptrs[:0]
	t0 := time.Now()
	err := d.build(b, &ptrs)
	t1 := time.Now()
	ferr := free(b, ptrs)
	t2 := time.Now()
	if err == nil && ferr == nil {
		s.Build, s.Release = append(s.Build, t1.Sub(t0)), append(s.Release, t2.Sub(t1))
	}
	return errors.Join(err, ferr)
}

func (d *DirectBuild) build(b gpuworker.Backend, ptrs *[]messages.DevicePtr) error {
	for _, n := range d.sizes {
		p, err := b.Alloc(n)
		if err != nil {
			return err
		}
		*ptrs = append(*ptrs, p)
	}
	if d.norm >= 0 {
		return b.Memset((*ptrs)[d.norm]+messages.DevicePtr(d.offset), 0, d.Plan.Buffers[arena.NormUnitW].Bytes)
	}
	return nil
}

// free frees ptrs newest first, keeping going after an error.
func free(b gpuworker.Backend, ptrs []messages.DevicePtr) error {
	var first error
	for i := len(ptrs) - 1; i >= 0; i-- {
		if err := b.Free(ptrs[i]); err != nil && first == nil {
			first = err
		}
	}
	return first
}
