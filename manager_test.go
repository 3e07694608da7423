package gpuarena_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

var quiet = gpuarena.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))

func llamaPlan(t *testing.T) *arena.Plan {
	t.Helper()
	cfg, err := arena.LoadConfig("examples/configs/llama-3.1-8b.json")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := arena.PlanFor(cfg, arena.Options{MaxBatchTokens: 512})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

func TestManagerLifecycle(t *testing.T) {
	ctx := context.Background()
	m, err := gpuarena.New(quiet)
	if err != nil {
		t.Fatal(err)
	}
	plan := llamaPlan(t)
	a, err := m.BuildArena(ctx, plan)
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l.Counters.CurrentBytes != plan.TotalBytes || l.BackendBytesInUse != plan.TotalBytes {
		t.Fatalf("ledger holds %d B (backend %d B), plan says %d B", l.Counters.CurrentBytes, l.BackendBytesInUse, plan.TotalBytes)
	}
	want := []byte("one forward step")
	var got []byte
	_, err = m.Forward(ctx, func(a *device.Arena, dev device.Device) error {
		if err := dev.CopyHtoD(a.Ptr(arena.HiddenStates), want); err != nil {
			return err
		}
		if err := dev.CopyDtoD(a.Ptr(arena.Residual), a.Ptr(arena.HiddenStates), int64(len(want))); err != nil {
			return err
		}
		got = make([]byte, len(want))
		return dev.CopyDtoH(got, a.Ptr(arena.Residual))
	})
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("forward: %v, read back %q", err, got)
	}
	if a.Ptr(arena.HiddenStates) == 0 || a.Bytes(arena.HiddenStates) != 512*4096*2 {
		t.Fatalf("hidden_states %#x, %d B; want [512, 4096] BF16", uint64(a.Ptr(arena.HiddenStates)), a.Bytes(arena.HiddenStates))
	}
	rep, err := m.Release(ctx)
	if err != nil || rep.Bytes != plan.TotalBytes {
		t.Fatalf("release: %+v, %v; want %d B freed", rep, err, plan.TotalBytes)
	}
	l, _ = m.Ledger(ctx)
	if l.Counters.CurrentBytes != 0 || l.BackendBytesInUse != 0 {
		t.Fatalf("after release the ledger holds %d B, the backend %d B", l.Counters.CurrentBytes, l.BackendBytesInUse)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := m.Forward(ctx, func(*device.Arena, device.Device) error { return nil }); !errors.Is(err, gpuarena.ErrClosed) {
		t.Fatalf("forward after Close: %v, want ErrClosed", err)
	}
	if _, err := m.Ledger(ctx); !errors.Is(err, gpuarena.ErrClosed) {
		t.Fatalf("ledger after Close: %v, want ErrClosed", err)
	}
}

func TestCloseFreesAnUnreleasedArena(t *testing.T) {
	sim, err := gpuworker.NewHostSim(gpuworker.HostSimConfig{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := gpuarena.New(quiet, gpuarena.WithBackendFactory(func() (gpuworker.Backend, error) { return sim, nil }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.BuildArena(context.Background(), llamaPlan(t)); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if sim.BytesInUse() != 0 {
		t.Fatalf("the device holds %d B after Close", sim.BytesInUse())
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, u := range []float64{0, -0.1, 1.5} {
		_, err := gpuarena.New(quiet, gpuarena.WithGPUMemoryUtilization(u))
		var oe *arena.OptionError
		if !errors.Is(err, gpuarena.ErrInvalidOption) || !errors.As(err, &oe) || oe.Option != "gpu_memory_utilization" {
			t.Fatalf("utilization %v: %v, want an OptionError naming gpu_memory_utilization", u, err)
		}
	}
	if _, err := gpuarena.New(quiet, gpuarena.WithArenaLayout("striped")); !errors.Is(err, gpuarena.ErrInvalidOption) {
		t.Fatalf("layout striped: %v, want ErrInvalidOption", err)
	}
	_, err := gpuarena.New(quiet, gpuarena.WithBackend(gpuworker.BackendConfig{Kind: "tpu"}))
	var nb *gpuworker.BackendNotBuiltInError
	if !errors.Is(err, gpuarena.ErrBackendNotBuiltIn) || !errors.As(err, &nb) || nb.Name != "tpu" || !slices.Contains(nb.Available, gpuworker.KindHostSim) {
		t.Fatalf("backend tpu: %v, want a BackendNotBuiltInError naming tpu and listing hostsim", err)
	}
}

func TestBuildArenaPastTheBudgetSaysWhy(t *testing.T) {
	m, err := gpuarena.New(quiet, gpuarena.WithBackend(gpuworker.BackendConfig{HostSim: gpuworker.HostSimConfig{TotalBytes: 64 << 20}}))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err = m.BuildArena(context.Background(), llamaPlan(t))
	var oom *gpuworker.OutOfMemoryError
	const budget = 60397977 // ⌊0.90 × 64 MiB⌋
	if !errors.As(err, &oom) || oom.Budget != budget || !oom.OverBudget {
		t.Fatalf("got %v, want an over-budget *OutOfMemoryError with a %d B budget", err, budget)
	}
	l, _ := m.Ledger(context.Background())
	if l.Counters.CurrentBytes != 0 {
		t.Fatalf("a failed build left %d B in the ledger", l.Counters.CurrentBytes)
	}
}

// A Manager call from inside a forward step would wait for the GPU thread it
// runs on; it returns ErrReentrant instead, and the manager keeps serving.
func TestManagerCallsFromInsideAStep(t *testing.T) {
	ctx := context.Background()
	m, err := gpuarena.New(quiet)
	if err != nil {
		t.Fatal(err)
	}
	plan := llamaPlan(t)
	if _, err := m.BuildArena(ctx, plan); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"ledger": func() error { _, err := m.Ledger(ctx); return err },
		"build":  func() error { _, err := m.BuildArena(ctx, plan); return err },
		"alloc":  func() error { _, err := m.Alloc(ctx, "x", 256); return err },
		"free": func() error {
			return m.Free(ctx, device.Allocation{Ptr: 1, Bytes: 1, Label: "x", Owner: device.UserOwner})
		},
		"free owner": func() error { _, err := m.FreeOwner(ctx, device.UserOwner); return err },
		"forward": func() error {
			_, err := m.Forward(ctx, func(*device.Arena, device.Device) error { return nil })
			return err
		},
		"carve":   func() error { _, _, err := m.CarveSlab(ctx, "x", 256); return err },
		"release": func() error { _, err := m.Release(ctx); return err },
		"close":   m.Close,
	}
	got := map[string]error{}
	_, err = m.Forward(ctx, func(*device.Arena, device.Device) error {
		for name, call := range calls {
			got[name] = call()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range calls {
		if !errors.Is(got[name], gpuarena.ErrReentrant) {
			t.Errorf("%s from inside a step: %v, want ErrReentrant", name, got[name])
		}
	}
	if _, err := m.Ledger(ctx); err != nil {
		t.Fatalf("ledger after the step: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}
