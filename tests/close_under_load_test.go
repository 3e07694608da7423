package tests

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
)

// closeClients is how many goroutines have requests in flight when Close is called.
const closeClients = 1000

// outcomes counts the results of the clients' requests by kind.
type outcomes struct {
	mu         sync.Mutex
	byKind     map[string]int
	unexpected []string
}

func (o *outcomes) note(op string, err error) {
	kind := "ok"
	switch {
	case err == nil:
	case errors.Is(err, gpuarena.ErrClosed):
		kind = "closed"
	case errors.Is(err, gpuarena.ErrReleased) && op != "ledger" && op != "meminfo":
		kind = "released"
	case errors.Is(err, gpuarena.ErrSlabExhausted) && op == "carve":
		kind = "slab exhausted"
	case errors.Is(err, gpuarena.ErrArenaBuilt) && op == "build":
		kind = "arena built"
	default:
		kind = "unexpected"
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.byKind[kind]++
	if kind == "unexpected" && len(o.unexpected) < 10 {
		o.unexpected = append(o.unexpected, fmt.Sprintf("%s: %v", op, err))
	}
}

// Close while 1,000 goroutines have requests in flight (forward steps,
// carves, builds, ledger and device reads): every request completes or gets
// ErrClosed (ErrReleased for a forward step, carve or build after the release
// Close does first); Close returns, is idempotent and safe to call
// concurrently, and leaves no goroutine and no device byte. The time Close
// took is logged, not asserted. With -tags cuda it runs on CUDA device 0.
func TestCloseUnderLoad(t *testing.T) {
	defer goleak.VerifyNone(t)
	dev := testBackend(t)
	m, err := gpuarena.New(quiet, gpuarena.WithBackendFactory(dev.factory))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := m.BuildArena(ctx, smallPlan()); err != nil {
		t.Fatal(err)
	}
	o := &outcomes{byKind: map[string]int{}}
	var clients, inFlight sync.WaitGroup
	inFlight.Add(closeClients)
	for i := range closeClients {
		clients.Go(func() {
			first := true
			for n := 0; ; n++ {
				op, err := closeLoadRequest(ctx, m, i, n)
				o.note(op, err)
				if first {
					first = false
					inFlight.Done()
				}
				if errors.Is(err, gpuarena.ErrClosed) {
					return
				}
			}
		})
	}
	inFlight.Wait() // every client has had a request answered and sent the next

	start := time.Now()
	errs := make(chan error, 3)
	for range 3 {
		go func() { errs <- m.Close() }()
	}
	var closeErr error
	for range 3 {
		if err := <-errs; err != nil {
			closeErr = err
		}
	}
	took := time.Since(start)
	clients.Wait()
	if closeErr != nil {
		t.Fatalf("Close under load: %v", closeErr)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("Close again: %v", err)
	}
	if n, ok := dev.clean(); !ok {
		t.Fatalf("the %s device holds %d B after Close", dev.name, n)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	kinds := make([]string, 0, len(o.byKind))
	for k, n := range o.byKind {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	t.Logf("%s: Close took %v with %d clients in flight; outcomes: %v", dev.name, took, closeClients, kinds)
	if len(o.unexpected) > 0 {
		t.Fatalf("requests failed with errors other than ErrClosed or ErrReleased: %v", o.unexpected)
	}
	if o.byKind["closed"] != closeClients {
		t.Fatalf("%d clients ended on ErrClosed, want all %d", o.byKind["closed"], closeClients)
	}
}

// closeLoadRequest is request n of client i: a mix of the manager's entry points.
func closeLoadRequest(ctx context.Context, m *gpuarena.Manager, i, n int) (string, error) {
	switch (i + n) % 8 {
	case 0, 1, 2:
		_, err := m.Forward(ctx, func(a *device.Arena, dev device.Device) error {
			off := device.DevicePtr((i % 256) * 4096)
			return dev.Memset(a.Ptr(arena.HiddenStates)+off, byte(i), 4096)
		})
		return "forward", err
	case 3:
		_, _, err := m.CarveSlab(ctx, "w", 256)
		return "carve", err
	case 4:
		_, err := m.Ledger(ctx)
		return "ledger", err
	case 5:
		_, _, err := m.MemInfo(ctx)
		return "meminfo", err
	case 6:
		_, err := m.Stats(ctx)
		return "stats", err
	default:
		_, err := m.BuildArena(ctx, smallPlan())
		return "build", err
	}
}
