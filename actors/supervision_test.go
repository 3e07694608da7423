package actors_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gpuarena/gpuarena/actors"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// panics is a Hook that panics where a test arms it, as a bug there would.
type panics struct {
	mu     sync.Mutex
	once   map[string]bool // "supervisor/point" → panic at the next occurrence
	always map[string]bool // "supervisor/point" → panic at every occurrence
}

func newPanics() *panics { return &panics{once: map[string]bool{}, always: map[string]bool{}} }

// arm makes the next time supervisor reaches point panic.
func (p *panics) arm(supervisor string, point actors.Point) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.once[supervisor+"/"+string(point)] = true
}

// armAlways makes every time supervisor reaches point panic.
func (p *panics) armAlways(supervisor string, point actors.Point) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.always[supervisor+"/"+string(point)] = true
}

func (p *panics) hook(supervisor string, point actors.Point) {
	key := supervisor + "/" + string(point)
	p.mu.Lock()
	hit := p.once[key] || p.always[key]
	delete(p.once, key)
	p.mu.Unlock()
	if hit {
		panic(fmt.Sprintf("injected panic at %s", key))
	}
}

func newPanicRig(t *testing.T) (*rig, *panics) {
	p := newPanics()
	return newRig(t, gpuworker.HostSimConfig{}, nil, actors.WithHook(p.hook), actors.WithLogger(quiet)), p
}

// agrees fails the test unless the ledger and the simulated device hold the
// same bytes, want of them.
func (r *rig) agrees(t *testing.T, want int64) device.Ledger {
	t.Helper()
	l, err := r.w.Ledger(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if l.Counters.CurrentBytes != want || l.BackendBytesInUse != want || r.sim.BytesInUse() != want {
		t.Fatalf("ledger %d B, backend reports %d B, device %d B; want %d B each", l.Counters.CurrentBytes, l.BackendBytesInUse, r.sim.BytesInUse(), want)
	}
	return l
}

func noStep(*device.Arena, device.Device) error { return nil }

// carvesAndReleasesAll checks that the pooled arena of testPlan built on r
// is served whole after a restart: its slab carves from offset 0, and
// Release frees the pool and the slab, 10 MiB, leaving nothing.
func (r *rig) carvesAndReleasesAll(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if _, off, err := r.s.CarveSlab(ctx, "ssm_rowwise_w_bf16", 4096, 0); err != nil || off != 0 {
		t.Fatalf("carve from the built arena's slab: offset %d, %v; want offset 0", off, err)
	}
	rep, err := r.s.Release(ctx)
	if err != nil || rep.Freed != 2 || rep.Bytes != 10*mib {
		t.Fatalf("release: %+v, %v; want the pool and the slab, 10 MiB", rep, err)
	}
	r.agrees(t, 0)
}

// A panic in the arena supervisor is answered, the supervisor restarted, and
// the restarted one serves the same arena, read back from the ledger.
func TestArenaSupervisorRestartKeepsTheArena(t *testing.T) {
	r, p := newPanicRig(t)
	ctx := context.Background()
	built, err := r.s.BuildArena(ctx, testPlan(), device.LayoutDiscrete)
	if err != nil {
		t.Fatal(err)
	}
	p.arm("arena", actors.PointForward)
	if _, err := r.s.Forward(ctx, noStep); !errors.Is(err, actors.ErrSupervisorPanic) {
		t.Fatalf("forward with a panicking supervisor: %v, want ErrSupervisorPanic", err)
	}
	var seen *device.Arena
	if _, err := r.s.Forward(ctx, func(a *device.Arena, dev device.Device) error {
		seen = a
		return dev.Memset(a.Ptr(arena.Logits), 7, a.Bytes(arena.Logits))
	}); err != nil {
		t.Fatalf("forward after the restart: %v", err)
	}
	if seen != built {
		t.Fatalf("the restarted supervisor runs steps on %p, want the built arena %p", seen, built)
	}
	if _, err := r.s.BuildArena(ctx, testPlan(), device.LayoutDiscrete); !errors.Is(err, actors.ErrArenaBuilt) {
		t.Fatalf("build after the restart: %v, want ErrArenaBuilt", err)
	}
	r.agrees(t, 10*mib)
	rep, err := r.s.Release(ctx)
	if err != nil || rep.Freed != 4 || rep.Bytes != 10*mib {
		t.Fatalf("release: %+v, %v; want 4 allocations, 10 MiB", rep, err)
	}
	r.agrees(t, 0)
}

// A build whose rollback could not free its first allocation (the second
// allocation fails, then the rollback's free), and a panic before the
// supervisor frees what is left: the caller is answered, the restarted
// supervisor frees the untagged leftover, and a new build succeeds.
func TestArenaSupervisorRestartFreesWhatAFailedBuildLeft(t *testing.T) {
	p := newPanics()
	r := newRig(t, gpuworker.HostSimConfig{}, faulty(gpuworker.Faults{FailAllocAt: 2, FailFreeAt: 1}), actors.WithHook(p.hook), actors.WithLogger(quiet))
	ctx := context.Background()
	p.arm("arena", actors.PointBuildFailed)
	if _, err := r.s.BuildArena(ctx, testPlan(), device.LayoutPooled); !errors.Is(err, actors.ErrSupervisorPanic) {
		t.Fatalf("build: %v, want ErrSupervisorPanic", err)
	}
	// The next request is handled after the restart's rebuild.
	if _, err := r.s.Forward(ctx, noStep); !errors.Is(err, actors.ErrNoArena) {
		t.Fatalf("forward after a failed build: %v, want ErrNoArena", err)
	}
	l := r.agrees(t, 0)
	if len(l.Entries) != 0 || l.Counters.Allocations != 1 || l.Counters.Frees != 1 || l.Counters.Failures != 1 {
		t.Fatalf("ledger %+v, counters %+v; want empty after 1 allocation (the pool), 1 refused (the slab) and 1 free", l.Entries, l.Counters)
	}
	if _, err := r.s.BuildArena(ctx, testPlan(), device.LayoutPooled); err != nil {
		t.Fatalf("build after the restart: %v", err)
	}
	r.agrees(t, 10*mib)
}

// A panic after the build is recorded: the arena exists (the ledger says so),
// and the restarted supervisor hands it to the slab and release supervisors.
func TestArenaSupervisorRestartAfterTheBuildRegistersIt(t *testing.T) {
	r, p := newPanicRig(t)
	ctx := context.Background()
	p.arm("arena", actors.PointBuilt)
	if _, err := r.s.BuildArena(ctx, testPlan(), device.LayoutPooled); !errors.Is(err, actors.ErrSupervisorPanic) {
		t.Fatalf("build: %v, want ErrSupervisorPanic", err)
	}
	var pool device.DevicePtr
	if _, err := r.s.Forward(ctx, func(a *device.Arena, _ device.Device) error { pool = a.Pool; return nil }); err != nil || pool == 0 {
		t.Fatalf("forward on the recorded arena: pool %#x, %v", uint64(pool), err)
	}
	r.carvesAndReleasesAll(t)
}

// A slab supervisor that fails on a built arena's registration loses
// nothing: it reads its slabs back from the ledger, and the release
// supervisor, registered by a message of its own, still frees everything.
func TestSlabSupervisorFailingOnTheRegistrationLosesNothing(t *testing.T) {
	r, p := newPanicRig(t)
	ctx := context.Background()
	p.arm("slab", actors.PointReceive) // its next message is the registration
	if _, err := r.s.BuildArena(ctx, testPlan(), device.LayoutPooled); err != nil {
		t.Fatal(err)
	}
	r.carvesAndReleasesAll(t)
}

// An arena supervisor restarted while a release is under way does not
// register the retired arena again: a registration behind the release would
// have the release supervisor free it a second time at the next Release.
func TestArenaSupervisorRestartDuringAReleaseRegistersNothing(t *testing.T) {
	p := newPanics()
	var received atomic.Int32 // messages the release supervisor got: the registration, then the release
	entered, open := make(chan struct{}), make(chan struct{})
	hook := func(supervisor string, point actors.Point) {
		if supervisor == "release" && point == actors.PointReceive && received.Add(1) == 2 {
			close(entered)
			<-open // hold the release in the release supervisor
		}
		p.hook(supervisor, point)
	}
	r := newRig(t, gpuworker.HostSimConfig{}, nil, actors.WithHook(hook), actors.WithLogger(quiet))
	var opened sync.Once
	unblock := func() { opened.Do(func() { close(open) }) }
	t.Cleanup(unblock) // before the rig's cleanup stops the supervisors
	ctx := context.Background()
	if _, err := r.s.BuildArena(ctx, testPlan(), device.LayoutPooled); err != nil {
		t.Fatal(err)
	}
	released := make(chan error, 1)
	go func() {
		_, err := r.s.Release(ctx)
		released <- err
	}()
	<-entered // the arena is retired; the release waits at the release supervisor
	p.arm("arena", actors.PointReceive)
	if _, err := r.s.Forward(ctx, noStep); !errors.Is(err, actors.ErrSupervisorPanic) {
		t.Fatalf("forward: %v, want ErrSupervisorPanic", err)
	}
	if _, err := r.s.Forward(ctx, noStep); !errors.Is(err, actors.ErrReleased) {
		t.Fatalf("forward after the restart: %v, want ErrReleased", err)
	}
	unblock()
	if err := <-released; err != nil {
		t.Fatalf("release: %v", err)
	}
	if rep, err := r.s.Release(ctx); err != nil || rep.Freed != 0 {
		t.Fatalf("second release: %+v, %v; want a no-op", rep, err)
	}
	if l := r.agrees(t, 0); l.Counters.Frees != 2 {
		t.Fatalf("%d frees, want 2 (the pool and the slab): nothing freed twice", l.Counters.Frees)
	}
}

// Every carve is in the ledger before it is handed out: a slab supervisor
// restarted after a carve it never answered goes on after that carve.
func TestSlabSupervisorRestartNeverHandsOutBytesTwice(t *testing.T) {
	r, p := newPanicRig(t)
	ctx := context.Background()
	plan := withSlabs(testPlan(), arena.SlabSpec{Name: "w", Bytes: 4096})
	a, err := r.s.BuildArena(ctx, plan, device.LayoutPooled)
	if err != nil {
		t.Fatal(err)
	}
	slab := a.Slabs[0].Ptr
	if _, off, err := r.s.CarveSlab(ctx, "w", 1000, 0); err != nil || off != 0 {
		t.Fatalf("first carve: offset %d, %v", off, err)
	}
	p.arm("slab", actors.PointCarved) // recorded at 1024, never answered
	if _, _, err := r.s.CarveSlab(ctx, "w", 1000, 0); !errors.Is(err, actors.ErrSupervisorPanic) {
		t.Fatalf("second carve: %v, want ErrSupervisorPanic", err)
	}
	p.arm("slab", actors.PointReceive) // panics before carving anything
	if _, _, err := r.s.CarveSlab(ctx, "w", 1000, 0); !errors.Is(err, actors.ErrSupervisorPanic) {
		t.Fatalf("third carve: %v, want ErrSupervisorPanic", err)
	}
	ptr, off, err := r.s.CarveSlab(ctx, "w", 1000, 0)
	if err != nil || off != 2048 || ptr != slab+2048 {
		t.Fatalf("carve after two restarts: %#x at offset %d, %v; want offset 2048, after the recorded carve at 1024", uint64(ptr), off, err)
	}
	if _, _, err := r.s.CarveSlab(ctx, "w", 1025, 0); !errors.Is(err, arena.ErrSlabExhausted) {
		t.Fatalf("carve past the end: %v, want ErrSlabExhausted", err)
	}
	l := r.agrees(t, a.PoolBytes+4096)
	var offsets []int64
	for _, e := range l.Entries {
		if e.Parent == slab {
			offsets = append(offsets, int64(e.Ptr-slab))
		}
	}
	if fmt.Sprint(offsets) != "[0 1024 2048]" {
		t.Fatalf("the ledger records carves at %v, want [0 1024 2048]", offsets)
	}
}

// A release supervisor that fails half-way is restarted with what is still
// live, read from the ledger; the next Release frees exactly that.
func TestReleaseSupervisorRestartFreesTheRest(t *testing.T) {
	r, p := newPanicRig(t)
	ctx := context.Background()
	if _, err := r.s.BuildArena(ctx, testPlan(), device.LayoutDiscrete); err != nil {
		t.Fatal(err)
	}
	p.arm("release", actors.PointReleased) // after the slab, before the arena
	if _, err := r.s.Release(ctx); !errors.Is(err, actors.ErrSupervisorPanic) {
		t.Fatalf("release: %v, want ErrSupervisorPanic", err)
	}
	r.agrees(t, 6*mib)
	rep, err := r.s.Release(ctx)
	if err != nil || rep.Freed != 3 || rep.Bytes != 6*mib {
		t.Fatalf("second release: %+v, %v; want the arena's 3 buffers, 6 MiB", rep, err)
	}
	if rep, err := r.s.Release(ctx); err != nil || rep.Freed != 0 {
		t.Fatalf("third release: %+v, %v; want a no-op", rep, err)
	}
	l := r.agrees(t, 0)
	if l.Counters.Frees != 4 {
		t.Fatalf("%d frees, want 4: nothing freed twice", l.Counters.Frees)
	}
}

// The release is recorded in the ledger: supervisors restarted after it
// still refuse with ErrReleased.
func TestRestartAfterReleaseStillRefuses(t *testing.T) {
	r, p := newPanicRig(t)
	ctx := context.Background()
	if _, err := r.s.BuildArena(ctx, testPlan(), device.LayoutPooled); err != nil {
		t.Fatal(err)
	}
	if _, err := r.s.Release(ctx); err != nil {
		t.Fatal(err)
	}
	p.arm("arena", actors.PointReceive)
	p.arm("slab", actors.PointReceive)
	if _, err := r.s.Forward(ctx, noStep); !errors.Is(err, actors.ErrSupervisorPanic) {
		t.Fatalf("forward: %v, want ErrSupervisorPanic", err)
	}
	if _, _, err := r.s.CarveSlab(ctx, "ssm_rowwise_w_bf16", 256, 0); !errors.Is(err, actors.ErrSupervisorPanic) {
		t.Fatalf("carve: %v, want ErrSupervisorPanic", err)
	}
	if _, err := r.s.Forward(ctx, noStep); !errors.Is(err, actors.ErrReleased) {
		t.Fatalf("forward after the restart: %v, want ErrReleased", err)
	}
	if _, err := r.s.BuildArena(ctx, testPlan(), device.LayoutPooled); !errors.Is(err, actors.ErrReleased) {
		t.Fatalf("build after the restart: %v, want ErrReleased", err)
	}
	if _, _, err := r.s.CarveSlab(ctx, "ssm_rowwise_w_bf16", 256, 0); !errors.Is(err, actors.ErrReleased) {
		t.Fatalf("carve after the restart: %v, want ErrReleased", err)
	}
	r.agrees(t, 0)
}

// A supervisor that keeps failing is stopped after actors.MaxRestarts
// restarts; calls to it fail with ErrSupervisorStopped instead of waiting,
// the other supervisors keep serving, and stopping the worker still frees
// everything.
func TestSupervisorStoppedAfterRepeatedFailures(t *testing.T) {
	r, p := newPanicRig(t)
	ctx := context.Background()
	if _, err := r.s.BuildArena(ctx, testPlan(), device.LayoutPooled); err != nil {
		t.Fatal(err)
	}
	p.armAlways("arena", actors.PointStarted)
	p.arm("arena", actors.PointReceive)
	if _, err := r.s.Forward(ctx, noStep); !errors.Is(err, actors.ErrSupervisorPanic) {
		t.Fatalf("forward: %v, want ErrSupervisorPanic", err)
	}
	if _, err := r.s.Forward(ctx, noStep); !errors.Is(err, actors.ErrSupervisorStopped) {
		t.Fatalf("forward to a supervisor that failed %d times: %v, want ErrSupervisorStopped", actors.MaxRestarts+1, err)
	}
	if _, err := r.s.Release(ctx); !errors.Is(err, actors.ErrSupervisorStopped) || !strings.Contains(err.Error(), "release: arena supervisor:") {
		t.Fatalf("release: %v, want ErrSupervisorStopped naming the arena supervisor", err)
	}
	if _, off, err := r.s.CarveSlab(ctx, "ssm_rowwise_w_bf16", 256, 0); err != nil || off != 0 {
		t.Fatalf("the slab supervisor still carves: offset %d, %v", off, err)
	}
	r.s.Stop()
	r.w.Stop()
	if r.sim.BytesInUse() != 0 {
		t.Fatalf("the device holds %d B after the worker stopped", r.sim.BytesInUse())
	}
}
