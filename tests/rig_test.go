package tests

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/actors"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/gpuworker"
)

const mib = 1 << 20

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// smallPlan is a hand-made plan: hidden_states 1 MiB, logits 3 MiB,
// norm_unit_w 2 MiB (BufferID order: hidden_states, logits, norm_unit_w) and
// one slab "w" of 4 MiB.
func smallPlan() *arena.Plan {
	p := &arena.Plan{ModelType: "test"}
	for i := range p.Buffers {
		p.Buffers[i] = arena.Buffer{ID: arena.BufferID(i), Absent: "not in the test plan"}
	}
	p.Buffers[arena.HiddenStates] = arena.Buffer{ID: arena.HiddenStates, DType: arena.BF16, Shape: []int64{512, 1024}, Bytes: 1 * mib}
	p.Buffers[arena.NormUnitW] = arena.Buffer{ID: arena.NormUnitW, DType: arena.BF16, Shape: []int64{1024 * 1024}, Bytes: 2 * mib}
	p.Buffers[arena.Logits] = arena.Buffer{ID: arena.Logits, DType: arena.BF16, Shape: []int64{512, 3072}, Bytes: 3 * mib}
	p.Slabs = []arena.SlabSpec{{Name: "w", Bytes: 4 * mib}}
	p.BufferBytes, p.SlabBytes, p.TotalBytes = 6*mib, 4*mib, 10*mib
	return p
}

// newSim makes a simulated device or fails the test.
func newSim(t testing.TB, cfg gpuworker.HostSimConfig) *gpuworker.HostSim {
	t.Helper()
	sim, err := gpuworker.NewHostSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sim
}

// simManager starts a manager on sim, closed when the test ends.
func simManager(t testing.TB, sim *gpuworker.HostSim, opts ...gpuarena.Option) *gpuarena.Manager {
	t.Helper()
	opts = append([]gpuarena.Option{quiet, gpuarena.WithBackendFactory(func() (gpuworker.Backend, error) { return sim, nil })}, opts...)
	m, err := gpuarena.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// newSystem is an actor system that logs nothing, shut down when the test ends.
func newSystem(t testing.TB) *actor.ActorSystem {
	t.Helper()
	s := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return discard }),
		actor.WithDeadLetterThrottleInterval(time.Millisecond),
	)
	t.Cleanup(s.Shutdown)
	return s
}

// simWorker starts a GPU worker on sim, stopped when the test ends.
func simWorker(t testing.TB, sim *gpuworker.HostSim) *gpuworker.Worker {
	t.Helper()
	w, err := gpuworker.Start(newSystem(t), func() (gpuworker.Backend, error) { return sim, nil }, gpuworker.WithLogger(discard))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

// ledgerer is what reads a ledger: a worker or a manager.
type ledgerer interface {
	Ledger(context.Context) (gpuarena.Ledger, error)
}

// agrees fails the test unless the ledger, the backend's own report in the
// snapshot, and the simulated device hold the same bytes, and returns the
// snapshot.
func agrees(t testing.TB, l ledgerer, sim *gpuworker.HostSim) gpuarena.Ledger {
	t.Helper()
	led, err := l.Ledger(context.Background())
	if err != nil {
		t.Fatalf("ledger: %v", err)
	}
	if led.Counters.CurrentBytes != led.BackendBytesInUse || led.BackendBytesInUse != sim.BytesInUse() {
		t.Fatalf("ledger %d B, backend reports %d B, device %d B: they must agree", led.Counters.CurrentBytes, led.BackendBytesInUse, sim.BytesInUse())
	}
	var sum int64
	for _, e := range led.Entries {
		if e.Parent == 0 {
			sum += e.Bytes
		}
	}
	if sum != led.Counters.CurrentBytes {
		t.Fatalf("the ledger's entries sum to %d B, its counter says %d B", sum, led.Counters.CurrentBytes)
	}
	return led
}

// supRig starts a GPU worker on sim and its supervisors — the manager's
// composition, with the worker in reach — stopped when the test ends.
func supRig(t testing.TB, sim *gpuworker.HostSim) (*gpuworker.Worker, *actors.Supervisors) {
	t.Helper()
	system := newSystem(t)
	w, err := gpuworker.Start(system, func() (gpuworker.Backend, error) { return sim, nil }, gpuworker.WithLogger(discard))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	s := actors.Spawn(system, w)
	t.Cleanup(s.Stop)
	return w, s
}
