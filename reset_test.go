package gpuarena_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/internal/testkit"
)

// A released manager builds again after Reset: the new arena serves forward
// steps and carves, the ledger no longer lists the arena's owner as
// retired, and a second release frees it. Reset of a built arena is
// ErrNotReleased and changes nothing; with no arena (new, or reset
// already) it does nothing.
func TestResetAfterRelease(t *testing.T) {
	ctx := context.Background()
	m, err := gpuarena.New(quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Reset(ctx); err != nil {
		t.Fatalf("Reset of a new manager: %v, want nothing done", err)
	}
	plan := testkit.SmallPlan("w")
	if _, err := m.BuildArena(ctx, plan); err != nil {
		t.Fatal(err)
	}
	if err := m.Reset(ctx); !errors.Is(err, gpuarena.ErrNotReleased) {
		t.Fatalf("Reset of a built arena: %v, want ErrNotReleased", err)
	}
	if _, err := m.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.BuildArena(ctx, plan); !errors.Is(err, gpuarena.ErrReleased) || !strings.Contains(err.Error(), "Reset") {
		t.Fatalf("build after release: %v, want ErrReleased naming Reset", err)
	}
	if err := m.Reset(ctx); err != nil {
		t.Fatalf("Reset after release: %v", err)
	}
	if err := m.Reset(ctx); err != nil {
		t.Fatalf("second Reset: %v, want nothing done", err)
	}
	if _, err := m.Forward(ctx, func(*device.Arena, device.Device) error { return nil }); !errors.Is(err, gpuarena.ErrNoArena) {
		t.Fatalf("forward after Reset, before a build: %v, want ErrNoArena", err)
	}
	led, err := m.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(led.Retired) != 0 || led.Counters.CurrentBytes != 0 {
		t.Fatalf("after Reset: retired %v, %d B held; want none", led.Retired, led.Counters.CurrentBytes)
	}
	a, err := m.BuildArena(ctx, plan)
	if err != nil {
		t.Fatalf("build after Reset: %v", err)
	}
	var buf arena.BufferID
	for _, b := range plan.Buffers {
		if b.Bytes >= 8 {
			buf = b.ID
			break
		}
	}
	want := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	got := make([]byte, len(want))
	if _, err := m.Forward(ctx, func(a *device.Arena, dev device.Device) error {
		p := a.Ptr(buf)
		if err := dev.CopyHtoD(p, want); err != nil {
			return err
		}
		return dev.CopyDtoH(got, p)
	}); err != nil || string(got) != string(want) {
		t.Fatalf("forward on the new arena: %v, read %v", err, got)
	}
	if len(a.Slabs) != 1 {
		t.Fatalf("the new arena has %d slabs, want the plan's 1", len(a.Slabs))
	}
	for _, sl := range a.Slabs {
		if _, _, err := m.CarveSlab(ctx, sl.Name, 256); err != nil {
			t.Fatalf("carve %s of the new arena: %v", sl.Name, err)
		}
	}
	rel, err := m.Release(ctx)
	if err != nil || rel.Bytes == 0 {
		t.Fatalf("second release: %v, freed %d B", err, rel.Bytes)
	}
	if led, err = m.Ledger(ctx); err != nil || led.Counters.CurrentBytes != 0 {
		t.Fatalf("after the second release: %v, %d B held", err, led.Counters.CurrentBytes)
	}
}
