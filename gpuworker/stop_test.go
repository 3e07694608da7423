package gpuworker_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// Forward steps queued behind a running one when the worker starts to stop
// are answered ErrClosed without running; the stop gives up on the running
// step at its context's end with a *StopError naming what the ledger holds;
// when the step returns, the GPU thread frees everything and exits.
func TestStopDoesNotStartQueuedStepsAndGivesUpOnAHungOne(t *testing.T) {
	sim, err := gpuworker.NewHostSim(gpuworker.HostSimConfig{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := gpuworker.Start(newSystem(t), func() (gpuworker.Backend, error) { return sim, nil }, gpuworker.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	ctx := bounded(t)
	mustAlloc(t, w, "user", 10*mib)

	hang, running := make(chan struct{}), make(chan struct{})
	hung := make(chan error, 1)
	go func() {
		_, err := w.Forward(ctx, func(device.Device) error { close(running); <-hang; return nil })
		hung <- err
	}()
	<-running

	const queued = 10000
	var ran atomic.Int64
	errs := make(chan error, queued)
	var wg sync.WaitGroup
	for range queued {
		wg.Go(func() {
			_, err := w.Forward(ctx, func(device.Device) error { ran.Add(1); return nil })
			errs <- err
		})
	}
	for w.MailboxDepth() < queued {
		if ctx.Err() != nil {
			t.Fatalf("only %d of %d steps queued", w.MailboxDepth(), queued)
		}
		time.Sleep(time.Millisecond)
	}

	giveUp, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = w.StopContext(giveUp)
	var se *gpuworker.StopError
	if !errors.As(err, &se) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, gpuworker.ErrClosed) {
		t.Fatalf("stop with a hung step: %v, want a *StopError (ErrClosed, DeadlineExceeded)", err)
	}
	if se.HeldBytes != 10*mib {
		t.Fatalf("StopError.HeldBytes %d, want %d", se.HeldBytes, 10*mib)
	}
	// The waiters were let go at once: each gets ErrClosed.
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, gpuworker.ErrClosed) {
			t.Fatalf("queued step: %v, want ErrClosed", err)
		}
	}
	if err := <-hung; !errors.Is(err, gpuworker.ErrClosed) {
		t.Fatalf("the hung step's caller: %v, want ErrClosed", err)
	}
	close(hang)
	select {
	case <-w.Done():
	case <-ctx.Done():
		t.Fatal("the worker did not finish after the hung step returned")
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("%d of the %d steps queued when the stop began ran, want 0", n, queued)
	}
	if sim.BytesInUse() != 0 {
		t.Fatalf("backend holds %d B after the worker finished, want 0", sim.BytesInUse())
	}
	if err := w.StopContext(ctx); err != nil {
		t.Fatalf("a second stop: %v, want nil", err)
	}
}
