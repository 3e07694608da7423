package gpuworker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// A round trip to the GPU thread allocates one object, the mailbox's queue
// node: the message and its reply channel come back for the next request.
// A forward step also allocates its device handle (a fresh one per step,
// so that one kept past its step is refused). A -race build drops a
// quarter of what a sync.Pool is given, so there a round trip must only
// allocate less than with a fresh request (4 objects, 5 for a step).
func TestRoundTripAllocatesOnlyItsQueueNode(t *testing.T) {
	w, _ := startSim(t, gpuworker.HostSimConfig{})
	ctx := context.Background()
	noop := func(device.Device) error { return nil }
	for _, c := range []struct {
		name string
		call func() error
		want float64
	}{
		{"MemInfo", func() error { _, _, err := w.MemInfo(ctx); return err }, 1},
		{"Ping", func() error { return w.Ping(ctx) }, 1},
		{"Forward", func() error { _, err := w.Forward(ctx, noop); return err }, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			allocs := testing.AllocsPerRun(1000, func() { err = errors.Join(err, c.call()) })
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case !raceEnabled && allocs != c.want:
				t.Errorf("a round trip allocates %v objects, want %v", allocs, c.want)
			case raceEnabled && allocs >= 3+c.want:
				t.Errorf("a round trip allocates %v objects under -race, want fewer than with a fresh request (%v)", allocs, 3+c.want)
			}
		})
	}
}

// A request whose caller stopped waiting is not reused: its reply comes
// later, into its own channel, and no later request reads it.
func TestAbandonedReplyIsNotReadByALaterRequest(t *testing.T) {
	w, _ := startSim(t, gpuworker.HostSimConfig{})
	errLate := errors.New("the reply of a step whose caller left")
	for range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		running, finish := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			_, err := w.Forward(ctx, func(device.Device) error {
				close(running)
				<-finish
				return errLate
			})
			done <- err
		}()
		<-running
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("the abandoned forward returned %v, want context.Canceled", err)
		}
		close(finish)
		// The GPU thread answers in order: once Ping is answered, the
		// late reply has been sent. A thread stuck sending it (into a
		// channel reused and full, or a message emptied for reuse) never
		// answers.
		wait, stop := context.WithTimeout(context.Background(), 10*time.Second)
		err := w.Ping(wait)
		stop()
		if err != nil {
			w.Abandon()
			t.Fatalf("ping after the late reply: %v (the GPU thread is stuck answering the abandoned step)", err)
		}
		if _, err := w.Forward(context.Background(), func(device.Device) error { return nil }); err != nil {
			t.Fatalf("a later forward returned %v, want nil (the late reply was read again)", err)
		}
	}
}
