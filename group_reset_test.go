package gpuarena_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena"
)

// A released group builds again after Reset, every rank; Reset of a built
// group is ErrNotReleased on every rank and changes nothing.
func TestGroupResetAfterRelease(t *testing.T) {
	ctx := context.Background()
	g, _ := newMachineGroup(t, machine(3, 0))
	if err := g.Reset(ctx); err != nil {
		t.Fatalf("Reset of a new group: %v, want nothing done", err)
	}
	if _, err := g.BuildArenas(ctx, plans(3)); err != nil {
		t.Fatal(err)
	}
	var re *gpuarena.RankError
	if err := g.Reset(ctx); !errors.Is(err, gpuarena.ErrNotReleased) || !errors.As(err, &re) {
		t.Fatalf("Reset of a built group: %v, want *RankErrors of ErrNotReleased", err)
	}
	if _, err := g.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := g.BuildArenas(ctx, plans(3)); !errors.Is(err, gpuarena.ErrReleased) || !strings.Contains(err.Error(), "call Reset") {
		t.Fatalf("build after release: %v, want ErrReleased naming Reset", err)
	}
	if err := g.Reset(ctx); err != nil {
		t.Fatalf("Reset after release: %v", err)
	}
	arenas, err := g.BuildArenas(ctx, plans(3))
	if err != nil || len(arenas) != 3 {
		t.Fatalf("build after Reset: %d arenas, %v", len(arenas), err)
	}
	ledgers, err := g.Ledgers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for r, l := range ledgers {
		if l.Counters.CurrentBytes != plans(1)[0].TotalBytes || len(l.Retired) != 0 {
			t.Errorf("rank %d after the rebuild: %d B held, retired %v; want the plan's %d B, none retired", r, l.Counters.CurrentBytes, l.Retired, plans(1)[0].TotalBytes)
		}
	}
	if _, err := g.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
