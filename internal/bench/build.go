package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime/trace"
	"time"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// DefaultBuildIdle is how long before a cycle's timed build the previous
// cycle's release ends by default (Config.BuildIdle), for both subjects. How
// fast a driver allocation is depends on how long ago the device last freed
// memory: on the H200 host a 6.2 GB cuMemAlloc took 0.43 ms 2 ms after a free of the
// same size, 2.1 ms after 10 ms, 4.1 ms after 20 ms and 5.6–6.2 ms after 40
// to 80 ms; a 250 MB one 0.30, 0.32, 0.35 and 0.45 ms (docs/performance.md).
// A Manager takes longer to set up than a bare thread, so timing from each
// subject's own setup would start the actor's build longer after the
// previous release than the direct calls' (so timed, DeepSeek-V3's 6.2 GB
// pooled build was 2.4–3.4× slower through the actor, all of it inside the
// driver).
const DefaultBuildIdle = 40 * time.Millisecond

// DefaultSetupIdle is how long before a cycle's timed build its setup's
// last driver call was made, at least, by default (Config.SetupIdle): a
// driver allocation is slower the longer the device has been idle (on the
// H200 host a 250 MB cuMemAlloc took 64–83 µs right after another call and
// 300–340 µs after 10 ms), and each subject's setup ends with one (the cuda
// backend's warm-up, the Manager's mem-info).
const DefaultSetupIdle = 10 * time.Millisecond

// CycleClock spaces build-and-release cycles, so that each timed build
// starts at least BuildIdle after the previous cycle's release and at least
// SetupIdle after its own setup, whichever is later; one clock is shared by
// both subjects of a build row, whose cycles alternate. Both subjects' builds
// start the same time after the previous release only while BuildIdle
// exceeds each subject's setup plus SetupIdle (the defaults do: a Manager's
// setup takes a few milliseconds); shorter, and the subject with the longer
// setup starts later. Its first cycle waits for SetupIdle only. Every cycle
// builds on a new Manager (one can build once), so however short the idles
// the actor's build runs on threads that have just parked; shorter idles
// make the driver's allocations faster and more variable (docs/performance.md).
// The zero value waits for nothing.
type CycleClock struct {
	BuildIdle, SetupIdle time.Duration // ≥ 0
	released             time.Time     // when the previous cycle's release ended (zero: none yet)
}

// idle collects the garbage of the setup, then waits until both are true:
// BuildIdle has passed since the previous release, and SetupIdle since
// setup, the setup's last driver call.
func (c *CycleClock) idle(setup time.Time) {
	settle()
	start := setup.Add(c.SetupIdle)
	if r := c.released.Add(c.BuildIdle); !c.released.IsZero() && r.After(start) {
		start = r
	}
	time.Sleep(time.Until(start))
}

// BuildSample is the durations of n build-and-release cycles: each build's
// and each release's wall time, and the part of it spent inside the
// backend's Alloc, Free and Memset calls (Driver).
type BuildSample struct {
	Build, Release             []time.Duration
	BuildDriver, ReleaseDriver []time.Duration
}

func newBuildSample(n int) BuildSample {
	return BuildSample{Build: make([]time.Duration, 0, n), Release: make([]time.Duration, 0, n),
		BuildDriver: make([]time.Duration, 0, n), ReleaseDriver: make([]time.Duration, 0, n)}
}

// add appends one cycle: build and release wall times and driver times.
func (s *BuildSample) add(build, release, buildDriver, releaseDriver time.Duration) {
	s.Build, s.Release = append(s.Build, build), append(s.Release, release)
	s.BuildDriver, s.ReleaseDriver = append(s.BuildDriver, buildDriver), append(s.ReleaseDriver, releaseDriver)
}

// Summaries summarises the builds and the releases; each one's wall time is
// the sum of its durations (the cycles run one after another).
func (s BuildSample) Summaries() (build, release Summary) {
	return Summarize(s.Build, sum(s.Build)), Summarize(s.Release, sum(s.Release))
}

// DriverMeans are the mean times a build and a release spent inside the
// backend's calls.
func (s BuildSample) DriverMeans() (build, release time.Duration) {
	return Summarize(s.BuildDriver, 0).Mean, Summarize(s.ReleaseDriver, 0).Mean
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
// the clock starts, so that their start-up is not counted as building; then,
// as for DirectBuild, the garbage is collected and the device left idle
// (BuildIdle, SetupIdle).
type ActorBuild struct {
	Factory gpuworker.BackendFactory
	Plan    *arena.Plan
	Layout  device.Layout
	Spin    time.Duration
}

// Cycle makes one timed build and release, spaced from the previous cycle's
// by clock, and appends their durations to s.
func (a ActorBuild) Cycle(clock *CycleClock, s *BuildSample) error {
	var driver driverClock
	m, err := gpuarena.New(gpuarena.WithBackendFactory(driver.factory(a.Factory)), gpuarena.WithArenaLayout(a.Layout),
		gpuarena.WithDispatcherSpin(a.Spin), gpuarena.WithLogger(quiet))
	if err != nil {
		return err
	}
	ctx := context.Background()
	warmed, err := warmManager(ctx, m)
	if err != nil {
		return errors.Join(err, m.Close())
	}
	// Starting an actor system leaves garbage (protoactor-go's process
	// registry allocates ~1,000 shard maps); collect it now, or the build
	// pays for it in GC assists that a server building once never sees.
	clock.idle(warmed)
	d0, t0 := driver.elapsed(), time.Now()
	trace.WithRegion(ctx, "actor build", func() { _, err = m.BuildArena(ctx, a.Plan) })
	t1, d1 := time.Now(), driver.elapsed()
	if err == nil {
		trace.WithRegion(ctx, "actor release", func() { _, err = m.Release(ctx) })
	}
	t2, d2 := time.Now(), driver.elapsed()
	clock.released = t2
	if err == nil {
		s.add(t1.Sub(t0), t2.Sub(t1), d1-d0, d2-d1)
	}
	return errors.Join(err, m.Close())
}

// warmManager makes one round trip to m's GPU thread and one to each of the
// arena and slab supervisors (requests they refuse, since there is no arena
// yet), so that their start-up is done before the clock starts. The first
// is the setup's last driver call (cuMemGetInfo), made at warmed.
func warmManager(ctx context.Context, m *gpuarena.Manager) (warmed time.Time, err error) {
	if _, _, err := m.MemInfo(ctx); err != nil {
		return time.Time{}, err
	}
	warmed = time.Now()
	if _, err := m.Forward(ctx, func(*device.Arena, device.Device) error { return nil }); !errors.Is(err, gpuarena.ErrNoArena) {
		return time.Time{}, fmt.Errorf("warm-up forward step: %v, want %v", err, gpuarena.ErrNoArena)
	}
	if _, _, err := m.CarveSlab(ctx, arena.SlabSSMRowwiseW, 1); err == nil {
		return time.Time{}, errors.New("warm-up carve: carved a slab before the arena was built")
	}
	return warmed, nil
}

// DirectBuild makes the driver calls of BuildArena for plan with layout —
// one Alloc for the pool or one per present buffer, one per slab, a Memset
// per zero-filled buffer (arena.BufferID.ZeroFill) — and of Release (a Free per allocation, newest
// first), straight on a backend.
//
// Each Cycle starts where an ActorBuild cycle starts: a new locked thread
// opens a backend (the cuda backend warms the thread up, as for a Manager's
// GPU thread), the garbage is collected and the device left idle (BuildIdle,
// SetupIdle); then the calls are timed on that thread.
type DirectBuild struct {
	Plan   *arena.Plan
	Layout device.Layout
	sizes  []int64     // the allocations, in order
	zeros  []zeroRange // the zero-filled buffers, in BufferID order
}

// zeroRange is a zero-filled buffer: bytes at offset in allocation alloc
// (an index in DirectBuild.sizes).
type zeroRange struct {
	alloc         int
	offset, bytes int64
}

// NewDirectBuild lays plan out as BuildArena would with layout.
func NewDirectBuild(plan *arena.Plan, layout device.Layout) (*DirectBuild, error) {
	d := &DirectBuild{Plan: plan, Layout: layout}
	switch layout {
	case device.LayoutPooled:
		pool, err := arena.NewPoolLayout(plan)
		if err != nil {
			return nil, err
		}
		d.sizes = append(d.sizes, pool.Bytes)
		for _, id := range arena.BufferIDs() {
			if off := pool.Offsets[id]; off >= 0 && id.ZeroFill() {
				d.zeros = append(d.zeros, zeroRange{alloc: 0, offset: off, bytes: plan.Buffers[id].Bytes})
			}
		}
	case device.LayoutDiscrete:
		for _, id := range arena.BufferIDs() {
			if b := plan.Buffers[id]; b.Present() {
				if id.ZeroFill() {
					d.zeros = append(d.zeros, zeroRange{alloc: len(d.sizes), bytes: b.Bytes})
				}
				d.sizes = append(d.sizes, b.Bytes)
			}
		}
	default:
		return nil, fmt.Errorf("bench: layout %q: want %q or %q", layout, device.LayoutPooled, device.LayoutDiscrete)
	}
	for _, s := range plan.Slabs {
		d.sizes = append(d.sizes, s.Bytes)
	}
	return d, nil
}

// Cycle opens a backend with factory on a new locked thread, makes one
// timed build and release there, spaced from the previous cycle's by clock,
// appends their durations to s, and closes the backend. On an error it frees
// what it allocated.
func (d *DirectBuild) Cycle(factory gpuworker.BackendFactory, clock *CycleClock, s *BuildSample) error {
	t := startThread()
	defer t.stop()
	return t.do(func() error {
		b, err := factory()
		if err != nil {
			return err
		}
		opened := time.Now()
		var driver driverClock
		tb := driver.wrap(b)
		ptrs := make([]device.DevicePtr, 0, len(d.sizes))
		clock.idle(opened)
		ctx := context.Background()
		t0 := time.Now()
		trace.WithRegion(ctx, "direct build", func() { err = d.build(tb, &ptrs) })
		t1, d1 := time.Now(), driver.elapsed()
		var ferr error
		trace.WithRegion(ctx, "direct release", func() { ferr = free(tb, ptrs) })
		t2, d2 := time.Now(), driver.elapsed()
		clock.released = t2
		if err == nil && ferr == nil {
			s.add(t1.Sub(t0), t2.Sub(t1), d1, d2-d1)
		}
		return errors.Join(err, ferr, b.Close())
	})
}

func (d *DirectBuild) build(b gpuworker.Backend, ptrs *[]device.DevicePtr) error {
	for _, n := range d.sizes {
		p, err := b.Alloc(n)
		if err != nil {
			return err
		}
		*ptrs = append(*ptrs, p)
	}
	for _, z := range d.zeros {
		if err := b.Memset((*ptrs)[z.alloc]+device.DevicePtr(z.offset), 0, z.bytes); err != nil {
			return err
		}
	}
	return nil
}

// free frees ptrs newest first, keeping going after an error.
func free(b gpuworker.Backend, ptrs []device.DevicePtr) error {
	var first error
	for i := len(ptrs) - 1; i >= 0; i-- {
		if err := b.Free(ptrs[i]); err != nil && first == nil {
			first = err
		}
	}
	return first
}
