package gpuworker_test

import (
	"errors"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// echo is an actor that answers a chan int with 7, as a supervisor answers
// its requests.
type echo struct{}

func (echo) Receive(c actor.Context) {
	if reply, ok := c.Message().(chan int); ok {
		reply <- 7
	}
}

// AskVia delivers a request to another actor of the worker's system and
// returns its reply; from inside a forward step, on the GPU thread, it
// returns ErrReentrant and sends nothing.
func TestAskViaAsksAnotherActorButNotFromAStep(t *testing.T) {
	system := newSystem(t)
	sim, err := gpuworker.NewHostSim(gpuworker.HostSimConfig{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := gpuworker.Start(system, func() (gpuworker.Backend, error) { return sim, nil }, gpuworker.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return echo{} }))
	ctx := bounded(t)

	reply := make(chan int, 1)
	if r, err := gpuworker.AskVia(ctx, w, pid, reply, reply, nil); err != nil || r != 7 {
		t.Fatalf("AskVia = %d, %v; want 7, nil", r, err)
	}
	inStep := make(chan int, 1)
	var stepErr error
	if _, err := w.Forward(ctx, func(device.Device) error {
		_, stepErr = gpuworker.AskVia(ctx, w, pid, inStep, inStep, nil)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(stepErr, gpuworker.ErrReentrant) || len(inStep) != 0 {
		t.Fatalf("AskVia from a step: %v with %d replies; want ErrReentrant and nothing sent", stepErr, len(inStep))
	}
}
