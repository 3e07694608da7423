package tests

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// Forward steps queued behind a running one when Close begins are not
// started: each of the 10,000 gets ErrClosed and none runs (the count, not a
// time, is what is asserted).
func TestCloseDoesNotStartQueuedSteps(t *testing.T) {
	sim := newSim(t, gpuworker.HostSimConfig{})
	closing := make(chan struct{})
	m := simManager(t, sim, gpuarena.WithLogger(slog.New(&onMessage{msg: "gpuarena: closing", seen: closing})))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := m.BuildArena(ctx, smallPlan()); err != nil {
		t.Fatal(err)
	}
	hang, running := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := m.Forward(ctx, func(*device.Arena, device.Device) error { close(running); <-hang; return nil })
		first <- err
	}()
	<-running

	const queued = 10000
	var ran atomic.Int64
	var sent, wg sync.WaitGroup
	errs := make(chan error, queued)
	sent.Add(queued)
	for range queued {
		wg.Go(func() {
			sent.Done()
			_, err := m.Forward(ctx, func(*device.Arena, device.Device) error { ran.Add(1); return nil })
			errs <- err
		})
	}
	sent.Wait()
	runtime.Gosched()

	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	<-closing // Close has begun: now the running step may return
	close(hang)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-first; err != nil {
		t.Fatalf("the step running when Close began: %v, want it to finish", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, gpuarena.ErrClosed) {
			t.Fatalf("a queued step: %v, want ErrClosed", err)
		}
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("%d steps queued behind the running one ran after Close began, want 0", n)
	}
	if sim.BytesInUse() != 0 {
		t.Fatalf("device holds %d B after Close, want 0", sim.BytesInUse())
	}
}

// CloseContext returns when its context is done even though a step hangs:
// a *gpuworker.StopError naming the bytes still held, every waiter answered,
// nothing of the manager's own left running but the GPU thread inside the
// step. When the step returns, that thread frees every byte and exits, and
// Close returns nil.
func TestCloseContextGivesUpOnAHungStep(t *testing.T) {
	sim := newSim(t, gpuworker.HostSimConfig{})
	m := simManager(t, sim)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	plan := smallPlan()
	if _, err := m.BuildArena(ctx, plan); err != nil {
		t.Fatal(err)
	}
	held := sim.BytesInUse()
	hang, running := make(chan struct{}), make(chan struct{})
	stepErr := make(chan error, 1)
	go func() {
		_, err := m.Forward(ctx, func(*device.Arena, device.Device) error { close(running); <-hang; return nil })
		stepErr <- err
	}()
	<-running

	giveUp, stop := context.WithTimeout(ctx, 100*time.Millisecond)
	defer stop()
	err := m.CloseContext(giveUp)
	var se *gpuworker.StopError
	if !errors.As(err, &se) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, gpuarena.ErrClosed) {
		t.Fatalf("CloseContext with a hung step: %v, want a *gpuworker.StopError (ErrClosed, DeadlineExceeded)", err)
	}
	if se.HeldBytes != held {
		t.Fatalf("StopError.HeldBytes = %d, want the %d B the arena holds", se.HeldBytes, held)
	}
	if err := <-stepErr; !errors.Is(err, gpuarena.ErrClosed) {
		t.Fatalf("the hung step's caller: %v, want ErrClosed once the close gave up", err)
	}
	if _, err := m.Ledger(ctx); !errors.Is(err, gpuarena.ErrClosed) {
		t.Fatalf("a request after the close gave up: %v, want ErrClosed", err)
	}
	select {
	case <-m.Done():
		t.Fatal("Done closed while the step still runs")
	default:
	}
	close(hang)
	if err := m.Close(); err != nil {
		t.Fatalf("Close after the step returned: %v, want nil", err)
	}
	<-m.Done()
	if sim.BytesInUse() != 0 {
		t.Fatalf("device holds %d B after the GPU thread finished, want 0", sim.BytesInUse())
	}
}

// onMessage is a slog handler that closes seen when a record whose message
// starts with msg is logged.
type onMessage struct {
	msg  string
	seen chan struct{}
	once sync.Once
}

func (h *onMessage) Enabled(context.Context, slog.Level) bool { return true }
func (h *onMessage) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.msg) {
		h.once.Do(func() { close(h.seen) })
	}
	return nil
}
func (h *onMessage) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *onMessage) WithGroup(string) slog.Handler      { return h }
