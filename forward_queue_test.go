package gpuarena_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
)

// Steps one goroutine queues run in the order it queued them, each after
// the one before ends, while it goes on (it queues the next before the
// first has finished); Wait returns each step's result, the same on a
// second call; the arena supervisor's refusals come from Wait, a nil step
// from QueueForward.
func TestQueueForward(t *testing.T) {
	ctx := context.Background()
	m, err := gpuarena.New(quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.QueueForward(ctx, nil); !errors.Is(err, gpuarena.ErrInvalidValue) {
		t.Fatalf("a nil step: %v, want ErrInvalidValue", err)
	}
	q, err := m.QueueForward(ctx, func(*device.Arena, device.Device) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Wait(); !errors.Is(err, gpuarena.ErrNoArena) {
		t.Fatalf("a step before the arena is built: %v, want ErrNoArena from Wait", err)
	}
	if _, err := m.BuildArena(ctx, llamaPlan(t)); err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	var order []int // appended on the GPU thread only
	steps := make([]*gpuarena.QueuedStep, 5)
	for i := range steps {
		steps[i], err = m.QueueForward(ctx, func(a *device.Arena, dev device.Device) error {
			if i == 0 {
				<-hold // the caller queues the others meanwhile
			}
			order = append(order, i)
			if i == 3 {
				return errors.New("step 3 fails")
			}
			return dev.Memset(a.Ptr(arena.Logits), byte(i), 64)
		})
		if err != nil {
			t.Fatalf("queue step %d: %v", i, err)
		}
	}
	close(hold)
	for i, q := range steps {
		_, err := q.Wait()
		if (i == 3) != (err != nil) {
			t.Fatalf("step %d: %v", i, err)
		}
		if _, again := q.Wait(); (again == nil) != (err == nil) {
			t.Fatalf("step %d: a second Wait says %v, the first %v", i, again, err)
		}
	}
	for i, got := range order {
		if got != i {
			t.Fatalf("steps ran in the order %v, want 0 1 2 3 4", order)
		}
	}
	if len(order) != len(steps) {
		t.Fatalf("%d of %d steps ran", len(order), len(steps))
	}
}
