package tests

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// A request whose context is done before it is sent is not sent: every
// entry point answers with the context's error and the ledger does not move.
func TestCancelledBeforeSend(t *testing.T) {
	sim := newSim(t, gpuworker.HostSimConfig{})
	m := simManager(t, sim)
	bg := context.Background()
	if _, err := m.BuildArena(bg, smallPlan()); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	expired, cancel2 := context.WithDeadline(bg, time.Now().Add(-time.Second))
	defer cancel2()
	step := func(*device.Arena, device.Device) error { t.Error("a cancelled step ran"); return nil }
	calls := map[string]func(ctx context.Context) error{
		"BuildArena": func(ctx context.Context) error { _, err := m.BuildArena(ctx, smallPlan()); return err },
		"Forward":    func(ctx context.Context) error { _, err := m.Forward(ctx, step); return err },
		"CarveSlab":  func(ctx context.Context) error { _, _, err := m.CarveSlab(ctx, "w", 256); return err },
		"Release":    func(ctx context.Context) error { _, err := m.Release(ctx); return err },
		"Ledger":     func(ctx context.Context) error { _, err := m.Ledger(ctx); return err },
		"MemInfo":    func(ctx context.Context) error { _, _, err := m.MemInfo(ctx); return err },
		"Stats":      func(ctx context.Context) error { _, err := m.Stats(ctx); return err },
	}
	before := agrees(t, m, sim)
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			if err := call(cancelled); !errors.Is(err, context.Canceled) {
				t.Errorf("%s with a cancelled context: %v, want context.Canceled", name, err)
			}
			if err := call(expired); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s past its deadline: %v, want context.DeadlineExceeded", name, err)
			}
		})
	}
	after := agrees(t, m, sim)
	if after.Counters != before.Counters || len(after.Entries) != len(before.Entries) {
		t.Fatalf("cancelled requests moved the ledger: %+v → %+v", before.Counters, after.Counters)
	}
	// Nothing was retired or carved: the manager goes on.
	if _, off, err := m.CarveSlab(bg, "w", 256); err != nil || off != 0 {
		t.Fatalf("carve after the cancelled ones: offset %d, %v; want 0", off, err)
	}
}

// The GPU worker's entry points with a cancelled context start nothing.
func TestWorkerCancelledBeforeSend(t *testing.T) {
	sim := newSim(t, gpuworker.HostSimConfig{})
	w := simWorker(t, sim)
	bg := context.Background()
	p, err := w.Alloc(bg, "o", "p", mib)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	calls := map[string]func() error{
		"Alloc": func() error { _, err := w.Alloc(ctx, "o", "x", mib); return err },
		"AllocBatch": func() error {
			_, _, err := w.AllocBatch(ctx, "o", []messages.AllocItem{{Label: "x", Bytes: mib}}, nil)
			return err
		},
		"Free":      func() error { return w.Free(ctx, "o", p) },
		"FreeBatch": func() error { _, err := w.FreeBatch(ctx, "o", []device.DevicePtr{p}); return err },
		"FreeOwner": func() error { _, _, err := w.FreeOwner(ctx, "o"); return err },
		"Memset":    func() error { return w.Memset(ctx, p, 1, mib) },
		"CopyHtoD":  func() error { return w.CopyHtoD(ctx, p, pattern) },
		"CopyDtoH":  func() error { _, err := w.CopyDtoH(ctx, p, 16); return err },
		"CopyDtoD":  func() error { return w.CopyDtoD(ctx, p, p+mib/2, 16) },
		"Forward":   func() error { _, err := w.Forward(ctx, func(device.Device) error { return nil }); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			if err := call(); !errors.Is(err, context.Canceled) {
				t.Errorf("%s: %v, want context.Canceled", name, err)
			}
		})
	}
	l := agrees(t, w, sim)
	if l.Counters.Allocations != 1 || l.Counters.Frees != 0 || l.Counters.CurrentBytes != mib {
		t.Fatalf("counters %+v: cancelled requests ran", l.Counters)
	}
	if got, _ := w.CopyDtoH(bg, p, 16); !bytes.Equal(got, make([]byte, 16)) {
		t.Fatal("a cancelled memset or copy wrote to the device")
	}
}

// Requests queued behind a slow call whose callers give up (cancelled, or
// timed out) are answered at once and never started when the device gets
// to them.
func TestCancelledWhileQueuedBehindASlowCall(t *testing.T) {
	sim, dev, h := holdSim(t)
	w := simWorker(t, dev)
	bg := context.Background()
	p, err := w.Alloc(bg, "o", "p", mib)
	if err != nil {
		t.Fatal(err)
	}
	h.arm("memset", 1)
	slow := make(chan error, 1)
	go func() { slow <- w.Memset(bg, p, 0xEE, mib) }()
	<-h.reached

	ctx, cancel := context.WithCancel(bg)
	queued := make(chan error, 1)
	go func() { _, err := w.Alloc(ctx, "q", "queued", mib); queued <- err }()
	// Long enough to be sent and queued on a loaded machine; the test waits
	// for it to expire, not for a time.
	timeout, cancelT := context.WithTimeout(bg, 250*time.Millisecond)
	defer cancelT()
	timedOut := make(chan error, 1)
	go func() {
		_, _, err := w.AllocBatch(timeout, "q", []messages.AllocItem{{Label: "a", Bytes: mib}, {Label: "b", Bytes: mib}}, nil)
		timedOut <- err
	}()
	waitQueued(t, w, 2)
	cancel()
	if err := <-queued; !errors.Is(err, context.Canceled) {
		t.Fatalf("queued alloc: %v, want context.Canceled", err)
	}
	if err := <-timedOut; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("queued batch: %v, want context.DeadlineExceeded", err)
	}
	select {
	case err := <-slow:
		t.Fatalf("the slow call finished (%v) while the device was held", err)
	default:
	}
	close(h.release)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	l := agrees(t, w, sim)
	if l.Counters.Allocations != 1 || l.Counters.Failures != 0 || l.Owners["q"].PeakBytes != 0 {
		t.Fatalf("counters %+v, owner q %+v: a request given up on was started", l.Counters, l.Owners["q"])
	}
}

// A caller that gives up during its request does not cancel it: the work
// runs to its end, its allocations are in the ledger under the caller's
// owner, and releasing that owner frees them — nothing is orphaned.
func TestCancelledDuringWorkerRequest(t *testing.T) {
	sim, dev, h := holdSim(t)
	w := simWorker(t, dev)
	bg := context.Background()
	h.arm("alloc", 2) // the batch's second item
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() {
		_, _, err := w.AllocBatch(ctx, "b", []messages.AllocItem{{Label: "x", Bytes: mib}, {Label: "y", Bytes: 2 * mib}, {Label: "z", Bytes: 3 * mib}}, nil)
		done <- err
	}()
	<-h.reached
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("batch: %v, want context.Canceled", err)
	}
	close(h.release)
	l := agrees(t, w, sim) // queued behind the batch: it has finished
	if l.Owners["b"].CurrentBytes != 6*mib {
		t.Fatalf("owner b holds %d B after the batch ran to its end, want 6 MiB", l.Owners["b"].CurrentBytes)
	}
	freed, bytes, err := w.FreeOwner(bg, "b")
	if err != nil || freed != 3 || bytes != 6*mib {
		t.Fatalf("releasing the owner: %d allocations, %d B, %v", freed, bytes, err)
	}
	if l := agrees(t, w, sim); l.Counters.CurrentBytes != 0 {
		t.Fatalf("the ledger holds %d B after the owner's release", l.Counters.CurrentBytes)
	}
}

// Through the supervisors: a forward step queued behind a slow call and
// given up on never runs; a carve given up on while queued carves nothing; a
// build given up on after it started completes and is released.
func TestCancelledArenaRequests(t *testing.T) {
	_, dev, h := holdSim(t)
	w, s := supRig(t, dev)
	bg := context.Background()
	a, err := s.BuildArena(bg, smallPlan(), device.LayoutPooled)
	if err != nil {
		t.Fatal(err)
	}

	// Hold the device with a memset; a forward step reaches the GPU
	// actor's mailbox behind it, and a carve queues behind the carve whose
	// ledger record waits there too.
	h.arm("memset", 1)
	slow := make(chan error, 1)
	go func() { slow <- w.Memset(bg, a.Ptr(arena.Logits), 1, mib) }()
	<-h.reached
	ctx, cancel := context.WithCancel(bg)
	ran := make(chan struct{}, 1)
	forward := make(chan error, 1)
	go func() {
		_, err := s.Forward(ctx, func(*device.Arena, device.Device) error { ran <- struct{}{}; return nil })
		forward <- err
	}()
	waitQueued(t, w, 1)
	type carved struct {
		off int64
		err error
	}
	first := make(chan carved, 1)
	go func() { _, off, err := s.CarveSlab(bg, "w", 1000, 0); first <- carved{off, err} }()
	waitQueued(t, w, 2)
	carve := make(chan error, 1)
	go func() { _, _, err := s.CarveSlab(ctx, "w", 1000, 0); carve <- err }()
	cancel()
	if err := <-forward; !errors.Is(err, context.Canceled) {
		t.Fatalf("queued forward: %v, want context.Canceled", err)
	}
	if err := <-carve; !errors.Is(err, context.Canceled) {
		t.Fatalf("queued carve: %v, want context.Canceled", err)
	}
	close(h.release)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	if r := <-first; r.err != nil || r.off != 0 {
		t.Fatalf("the carve that was not given up on: offset %d, %v", r.off, r.err)
	}
	if _, off, err := s.CarveSlab(bg, "w", 1000, 0); err != nil || off != 1024 {
		t.Fatalf("next carve: offset %d, %v; want offset 1024 (the cancelled carve took nothing)", off, err)
	}
	if _, err := s.Forward(bg, func(*device.Arena, device.Device) error { return nil }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
		t.Fatal("the forward step given up on while queued ran")
	default:
	}
}

// A build whose caller gives up once it has started runs to its end and is
// registered: Release frees it, and nothing is left.
func TestCancelledDuringBuildIsReleased(t *testing.T) {
	sim, dev, h := holdSim(t)
	w, s := supRig(t, dev)
	bg := context.Background()
	h.arm("alloc", 2) // the slab, after the pool
	ctx, cancel := context.WithCancel(bg)
	build := make(chan error, 1)
	go func() { _, err := s.BuildArena(ctx, smallPlan(), device.LayoutPooled); build <- err }()
	<-h.reached
	cancel()
	if err := <-build; !errors.Is(err, context.Canceled) {
		t.Fatalf("build: %v, want context.Canceled", err)
	}
	close(h.release)
	// Queued behind the build in the arena supervisor: the build has finished.
	if _, err := s.BuildArena(bg, smallPlan(), device.LayoutPooled); !errors.Is(err, gpuarena.ErrArenaBuilt) {
		t.Fatalf("second build: %v, want ErrArenaBuilt (the given-up build finished)", err)
	}
	if l := agrees(t, w, sim); l.Owners[device.ArenaOwner].CurrentBytes != 6*mib || l.Owners[device.SlabOwner("w")].CurrentBytes != 4*mib {
		t.Fatalf("owners %+v, want the arena's 6 MiB and the slab's 4 MiB", l.Owners)
	}
	rep, err := s.Release(bg)
	if err != nil || rep.Freed != 2 || rep.Bytes != 10*mib {
		t.Fatalf("release: %+v, %v; want the pool and the slab", rep, err)
	}
	if l := agrees(t, w, sim); l.Counters.CurrentBytes != 0 {
		t.Fatalf("the ledger holds %d B after release", l.Counters.CurrentBytes)
	}
}

// A forward step whose caller gives up while it runs runs to its end, and
// its caller waits for it (the step may use the caller's memory): Forward
// returns the step's own result, after the step returned.
func TestCancelledDuringForwardStepFinishes(t *testing.T) {
	sim := newSim(t, gpuworker.HostSimConfig{})
	m := simManager(t, sim)
	bg := context.Background()
	if _, err := m.BuildArena(bg, smallPlan()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	started, finish := make(chan struct{}), make(chan struct{})
	var stepDone atomic.Bool
	type result struct {
		err      error
		stepDone bool // whether the step had returned when Forward did
	}
	forward := make(chan result, 1)
	go func() {
		_, err := m.Forward(ctx, func(a *device.Arena, dev device.Device) error {
			close(started)
			<-finish
			err := dev.CopyHtoD(a.Ptr(arena.Logits), pattern)
			stepDone.Store(true)
			return err
		})
		forward <- result{err, stepDone.Load()}
	}()
	<-started
	cancel()
	close(finish)
	if r := <-forward; r.err != nil || !r.stepDone {
		t.Fatalf("forward whose caller gave up while its step ran: %v, returned after the step: %v; want the step's result (nil), after it", r.err, r.stepDone)
	}
	var got []byte
	if _, err := m.Forward(bg, func(a *device.Arena, dev device.Device) error {
		got = make([]byte, len(pattern))
		return dev.CopyDtoH(got, a.Ptr(arena.Logits))
	}); err != nil || !bytes.Equal(got, pattern) {
		t.Fatalf("the given-up step's write is not there (%v)", err)
	}
}
