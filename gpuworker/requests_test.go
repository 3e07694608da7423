package gpuworker_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
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

// Many callers mix answered, abandoned (context done while queued or while
// running) and Goexit-cut requests of several kinds: every answer a caller
// reads is its own, and the GPU thread never blocks on a reused, full
// channel.
func TestPooledRepliesNeverCrossTalk(t *testing.T) {
	w, _ := startSim(t, gpuworker.HostSimConfig{})
	const callers, rounds = 8, 300
	var wg sync.WaitGroup
	errc := make(chan error, callers)
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ptr, err := w.Alloc(context.Background(), fmt.Sprint("owner", g), "buf", 64)
			if err != nil {
				errc <- err
				return
			}
			for i := range rounds {
				mine := fmt.Errorf("caller %d round %d", g, i)
				switch i % 6 {
				case 0: // answered step with its own error
					_, err := w.Forward(context.Background(), func(device.Device) error { return mine })
					if !errors.Is(err, mine) {
						errc <- fmt.Errorf("forward %v: got %v", mine, err)
						return
					}
				case 1: // a step cut short by Goexit
					_, err := w.Forward(context.Background(), func(device.Device) error { runtime.Goexit(); return nil })
					if !errors.Is(err, gpuworker.ErrStepExited) {
						errc <- fmt.Errorf("goexit forward %v: got %v", mine, err)
						return
					}
				case 2: // abandoned while running or queued
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%5)*20*time.Microsecond)
					_, err := w.Forward(ctx, func(device.Device) error { time.Sleep(50 * time.Microsecond); return mine })
					cancel()
					if err != nil && !errors.Is(err, mine) && !errors.Is(err, context.DeadlineExceeded) {
						errc <- fmt.Errorf("abandoned forward %v: got %v", mine, err)
						return
					}
				case 3: // own data back
					b := byte(g*31 + i)
					if err := w.CopyHtoD(context.Background(), ptr, []byte{b, b, b}); err != nil {
						errc <- err
						return
					}
					got, err := w.CopyDtoH(context.Background(), ptr, 3)
					if err != nil || len(got) != 3 || got[0] != b {
						errc <- fmt.Errorf("caller %d read %v, %v; want %d", g, got, err, b)
						return
					}
				case 4: // abandoned pings
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%3)*time.Microsecond)
					err := w.Ping(ctx)
					cancel()
					if err != nil && !errors.Is(err, context.DeadlineExceeded) {
						errc <- fmt.Errorf("ping: %v", err)
						return
					}
				case 5:
					if err := w.Ping(context.Background()); err != nil {
						errc <- fmt.Errorf("ping: %v", err)
						return
					}
				}
			}
			errc <- nil
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		w.Abandon()
		t.Fatal("callers stuck: the GPU thread blocked answering")
	}
	close(errc)
	for err := range errc {
		if err != nil {
			t.Error(err)
		}
	}
}
