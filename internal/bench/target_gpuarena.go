package bench

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena/gpuworker"
)

// gpuArena is gpuarena's GPU actor, gpuworker.Worker, on its pinned
// dispatcher: empty is Worker.Ping, meminfo Worker.MemInfo.
type gpuArena struct {
	system *actor.ActorSystem
	w      *gpuworker.Worker
}

func newGPUArena(f gpuworker.BackendFactory, spin time.Duration) (*gpuArena, error) {
	system := newSystem()
	w, err := gpuworker.Start(system, f, gpuworker.WithSpin(spin), gpuworker.WithLogger(quiet))
	if err != nil {
		system.Shutdown()
		return nil, err
	}
	return &gpuArena{system: system, w: w}, nil
}

// Concurrent is true: the worker's calls are safe for concurrent use.
func (g *gpuArena) Concurrent() bool { return true }

// Exec runs body with a call that uses the worker's typed calls.
func (g *gpuArena) Exec(body func(call func(Op) error) error) error {
	ctx := context.Background()
	return body(func(op Op) error {
		if op == OpMemInfo {
			_, _, err := g.w.MemInfo(ctx)
			return err
		}
		return g.w.Ping(ctx)
	})
}

// Close stops the worker (which closes the backend on its thread) and the
// actor system.
func (g *gpuArena) Close() error {
	g.w.Stop()
	g.system.Shutdown()
	return nil
}
