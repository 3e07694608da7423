package gpuworker_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena/gpuworker"
)

const mib = 1 << 20

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newSystem returns an actor system that logs nothing and is shut down when
// the test ends.
func newSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	s := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }),
		actor.WithDeadLetterThrottleInterval(time.Millisecond),
	)
	t.Cleanup(s.Shutdown)
	return s
}

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

func startWith(t *testing.T, f gpuworker.BackendFactory, opts ...gpuworker.WorkerOption) *gpuworker.Worker {
	t.Helper()
	w, err := gpuworker.Start(newSystem(t), f, append([]gpuworker.WorkerOption{gpuworker.WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}
