package gpuworker_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// QueueForward returns before its step runs; queued steps run in the order
// they were queued, each answered on its own channel; from inside a step it
// is refused with ErrReentrant, and after Stop with ErrClosed.
func TestQueueForward(t *testing.T) {
	w, _ := startSim(t, gpuworker.HostSimConfig{})
	ctx := context.Background()
	hold := make(chan struct{})
	var order []int // appended on the GPU thread only
	replies := make([]chan messages.ForwardReply, 4)
	for i := range replies {
		replies[i] = make(chan messages.ForwardReply, 1)
		step := func(device.Device) error {
			if i == 0 {
				<-hold // the others are queued behind it by now
			}
			order = append(order, i)
			if i == 3 {
				return w.QueueForward(ctx, func(device.Device) error { return nil }, make(chan messages.ForwardReply, 1))
			}
			return nil
		}
		if err := w.QueueForward(ctx, step, replies[i]); err != nil {
			t.Fatalf("queue step %d: %v", i, err)
		}
	}
	close(hold)
	for i, reply := range replies {
		r := <-reply
		if i == 3 {
			if !errors.Is(r.Err, gpuworker.ErrReentrant) {
				t.Fatalf("QueueForward inside a step: %v, want ErrReentrant", r.Err)
			}
			continue
		}
		if r.Err != nil {
			t.Fatalf("step %d: %v", i, r.Err)
		}
	}
	if len(order) != 4 || order[0] != 0 || order[1] != 1 || order[2] != 2 || order[3] != 3 {
		t.Fatalf("steps ran in the order %v, want 0 1 2 3", order)
	}
	w.Stop()
	if err := w.QueueForward(ctx, func(device.Device) error { return nil }, make(chan messages.ForwardReply, 1)); !errors.Is(err, gpuworker.ErrClosed) {
		t.Fatalf("after Stop: %v, want ErrClosed", err)
	}
	select {
	case <-w.Gone():
	default:
		t.Fatal("Gone is open after Stop returned")
	}
}
