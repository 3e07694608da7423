package tests

import (
	"context"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/actors"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/testkit"
)

const mib = testkit.MiB

var (
	discard   = testkit.Discard
	newSystem = testkit.NewActorSystem
)

// smallPlan is testkit.SmallPlan with one slab "w".
func smallPlan() *arena.Plan { return testkit.SmallPlan("w") }

// newSim makes a simulated device or fails the test.
func newSim(t testing.TB, cfg gpuworker.HostSimConfig) *gpuworker.HostSim {
	t.Helper()
	sim, err := gpuworker.NewHostSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sim
}

// simManager starts a manager on dev (a simulated device, or one wrapped by
// gpuworker.WithFaults), closed when the test ends.
func simManager(t testing.TB, dev gpuworker.Backend, opts ...gpuarena.Option) *gpuarena.Manager {
	t.Helper()
	opts = append([]gpuarena.Option{quiet, gpuarena.WithBackendFactory(func() (gpuworker.Backend, error) { return dev, nil })}, opts...)
	m, err := gpuarena.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// simWorker starts a GPU worker on dev (a simulated device, or one wrapped by
// gpuworker.WithFaults), stopped when the test ends. It sets
// no budget (gpuworker.WithoutBudget): only the device refuses allocations,
// and the device's calls start with the test's own (the fault matrix counts
// them).
func simWorker(t testing.TB, dev gpuworker.Backend) *gpuworker.Worker {
	t.Helper()
	w, err := gpuworker.Start(newSystem(t), func() (gpuworker.Backend, error) { return dev, nil },
		gpuworker.WithLogger(discard), gpuworker.WithoutBudget())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

// ledgerer is what reads a ledger: a worker or a manager.
type ledgerer interface {
	Ledger(context.Context) (device.Ledger, error)
}

// agrees fails the test unless the ledger, the backend's own report in the
// snapshot, and the simulated device hold the same bytes, and returns the
// snapshot.
func agrees(t testing.TB, l ledgerer, sim *gpuworker.HostSim) device.Ledger {
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

// supRig starts a GPU worker on dev and its supervisors — the manager's
// composition, with the worker in reach — stopped when the test ends.
func supRig(t testing.TB, dev gpuworker.Backend) (*gpuworker.Worker, *actors.Supervisors) {
	t.Helper()
	system := newSystem(t)
	w, err := gpuworker.Start(system, func() (gpuworker.Backend, error) { return dev, nil }, gpuworker.WithLogger(discard))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	s := actors.Spawn(system, w)
	t.Cleanup(s.Stop)
	return w, s
}
