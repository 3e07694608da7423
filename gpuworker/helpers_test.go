package gpuworker_test

import (
	"testing"

	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/testkit"
)

const mib = testkit.MiB

var (
	quiet     = testkit.Discard
	newSystem = testkit.NewActorSystem
)

// startSim starts a worker on a fresh simulated device and stops it when the
// test ends.
func startSim(t *testing.T, cfg gpuworker.HostSimConfig, opts ...gpuworker.WorkerOption) (*gpuworker.Worker, *gpuworker.HostSim) {
	t.Helper()
	sim, err := gpuworker.NewHostSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := startWith(t, func() (gpuworker.Backend, error) { return sim, nil }, opts...)
	return w, sim
}

// startFaulty is startSim with the device wrapped in plan (WithFaults); it
// returns the device itself, for its bytes in use.
func startFaulty(t *testing.T, cfg gpuworker.HostSimConfig, plan gpuworker.Faults, opts ...gpuworker.WorkerOption) (*gpuworker.Worker, *gpuworker.HostSim) {
	t.Helper()
	sim, err := gpuworker.NewHostSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := gpuworker.WithFaults(sim, plan)
	w := startWith(t, func() (gpuworker.Backend, error) { return b, nil }, opts...)
	return w, sim
}

func startWith(t *testing.T, f gpuworker.BackendFactory, opts ...gpuworker.WorkerOption) *gpuworker.Worker {
	t.Helper()
	w, err := gpuworker.Start(newSystem(t), f, append([]gpuworker.WorkerOption{gpuworker.WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}
