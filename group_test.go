package gpuarena_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/testkit"
)

// newMachineGroup opens a group over a simulated machine of c and closes it
// when the test ends.
func newMachineGroup(t *testing.T, c gpuworker.MachineConfig, opts ...gpuarena.GroupOption) (*gpuarena.Group, *gpuworker.HostSimMachine) {
	t.Helper()
	mach, err := gpuworker.NewHostSimMachine(c)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gpuarena.NewGroup(append([]gpuarena.GroupOption{gpuarena.WithDeviceFactories(mach.Factories()...), gpuarena.WithRankOptions(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	})
	return g, mach
}

// machine is n simulated devices of capacity bytes each (0: an H200's).
func machine(n int, capacity int64) gpuworker.MachineConfig {
	c := gpuworker.MachineConfig{Devices: make([]gpuworker.HostSimConfig, n)}
	for i := range c.Devices {
		c.Devices[i] = gpuworker.HostSimConfig{Name: fmt.Sprintf("hostsim %d", i), TotalBytes: capacity}
	}
	return c
}

// plans is the same small plan for each of n ranks.
func plans(n int) []*arena.Plan {
	ps := make([]*arena.Plan, n)
	for i := range ps {
		ps[i] = testkit.SmallPlan("w")
	}
	return ps
}

// A fault on any one rank's build rolls back every rank's arena, leaves
// what the ranks held before (here an allocation of the embedder's on each)
// and names the rank; the group then refuses to build again.
func TestGroupBuildRollsBackEveryRank(t *testing.T) {
	const ranks = 4
	ctx := context.Background()
	for k := range ranks {
		t.Run(fmt.Sprintf("fault on rank %d", k), func(t *testing.T) {
			c := machine(ranks, 0)
			c.Faults = make([]gpuworker.Faults, ranks)
			c.Faults[k] = gpuworker.Faults{FailAllocAt: 2} // the first is the embedder's
			g, mach := newMachineGroup(t, c)
			for r := range ranks {
				if _, err := g.Rank(r).Alloc(ctx, "user buffer", testkit.MiB); err != nil {
					t.Fatal(err)
				}
			}
			_, err := g.BuildArenas(ctx, plans(ranks))
			var re *gpuarena.RankError
			switch {
			case !errors.As(err, &re):
				t.Fatalf("build: %v, want a *RankError", err)
			case re.Rank != k || re.Device.Ordinal != k || re.Op != "build arena":
				t.Fatalf("rank error %+v, want build arena on rank %d, device %d", re, k, k)
			case !errors.Is(err, gpuarena.ErrOutOfMemory):
				t.Fatalf("build: %v, want ErrOutOfMemory", err)
			case !strings.Contains(err.Error(), fmt.Sprintf("rank %d (hostsim device %d, hostsim %d)", k, k, k)):
				t.Fatalf("error %q does not name the rank and its device", err)
			}
			ledgers, err := g.Ledgers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for r, l := range ledgers {
				if l.Counters.CurrentBytes != testkit.MiB || mach.Device(r).BytesInUse() != testkit.MiB {
					t.Errorf("rank %d holds %d B (device %d B) after the rollback, want the embedder's %d B", r, l.Counters.CurrentBytes, mach.Device(r).BytesInUse(), testkit.MiB)
				}
			}
			if _, err := g.BuildArenas(ctx, plans(ranks)); !errors.Is(err, gpuarena.ErrReleased) {
				t.Fatalf("build after a rollback: %v, want ErrReleased", err)
			}
		})
	}
}

// A rank that cannot start closes the ranks that did; the error names it.
func TestNewGroupRollsBackStartedRanks(t *testing.T) {
	for k := range 3 {
		t.Run(fmt.Sprintf("rank %d", k), func(t *testing.T) {
			var closed atomic.Int32
			fs := make([]gpuworker.BackendFactory, 3)
			for r := range fs {
				fs[r] = func() (gpuworker.Backend, error) {
					if r == k {
						return nil, fmt.Errorf("device %d: %w", r, gpuworker.ErrNoDevice)
					}
					sim, err := gpuworker.NewHostSim(gpuworker.HostSimConfig{})
					return closeCounter{sim, &closed}, err
				}
			}
			g, err := gpuarena.NewGroup(gpuarena.WithDeviceFactories(fs...), gpuarena.WithRankOptions(quiet))
			var re *gpuarena.RankError
			switch {
			case g != nil:
				g.Close()
				t.Fatal("NewGroup succeeded with a rank that cannot open its device")
			case !errors.As(err, &re) || re.Rank != k || re.Op != "start" || !errors.Is(err, gpuworker.ErrNoDevice):
				t.Fatalf("NewGroup: %v, want a start *RankError of rank %d wrapping ErrNoDevice", err, k)
			case closed.Load() != 2:
				t.Fatalf("%d of the 2 started devices closed", closed.Load())
			}
		})
	}
}

// closeCounter counts its device's Close.
type closeCounter struct {
	*gpuworker.HostSim
	closed *atomic.Int32
}

func (c closeCounter) Close() error {
	c.closed.Add(1)
	return c.HostSim.Close()
}

// One device out of memory leaves the others untouched: its allocation is
// refused with an error naming the device's budget, the others' ledgers do
// not change, and group steps still run on every rank.
func TestGroupOneDeviceOutOfMemory(t *testing.T) {
	ctx := context.Background()
	c := machine(3, 0)
	c.Devices[1].TotalBytes = 32 * testkit.MiB
	g, mach := newMachineGroup(t, c)
	if _, err := g.BuildArenas(ctx, plans(3)); err != nil {
		t.Fatal(err)
	}
	before, err := g.Ledgers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Rank(1).Alloc(ctx, "too big", 32*testkit.MiB)
	var oom *gpuworker.OutOfMemoryError
	if !errors.As(err, &oom) || !oom.OverBudget || oom.Budget != g.Budgets()[1] {
		t.Fatalf("alloc past device 1's budget: %v, want an over-budget *OutOfMemoryError with budget %d", err, g.Budgets()[1])
	}
	after, err := g.Ledgers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for r := range 3 {
		wantFailures := before[r].Counters.Failures
		if r == 1 {
			wantFailures++
		}
		if after[r].Counters.CurrentBytes != before[r].Counters.CurrentBytes || after[r].Counters.Failures != wantFailures ||
			mach.Device(r).BytesInUse() != before[r].Counters.CurrentBytes {
			t.Errorf("rank %d: ledger %+v → %+v, device %d B; want only rank 1's failure counted", r, before[r].Counters, after[r].Counters, mach.Device(r).BytesInUse())
		}
	}
	if g.Budgets()[0] == g.Budgets()[1] {
		t.Errorf("budgets %v: each device has its own", g.Budgets())
	}
	var ran atomic.Int32
	if _, err := g.Forward(ctx, func(int, *device.Arena, device.Device) error { ran.Add(1); return nil }); err != nil || ran.Load() != 3 {
		t.Fatalf("group step after one device's OOM: %v, ran on %d ranks, want 3", err, ran.Load())
	}
}

var errStep = errors.New("step failed")

// An error of one rank fails the group step and names the rank; the other
// ranks' parts ran.
func TestGroupForwardNamesTheFailingRank(t *testing.T) {
	ctx := context.Background()
	g, _ := newMachineGroup(t, machine(4, 0))
	if _, err := g.BuildArenas(ctx, plans(4)); err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int32
	took, err := g.Forward(ctx, func(rank int, _ *device.Arena, _ device.Device) error {
		ran.Add(1)
		if rank == 2 {
			return errStep
		}
		return nil
	})
	var re *gpuarena.RankError
	switch {
	case !errors.As(err, &re) || re.Rank != 2 || re.Op != "forward" || !errors.Is(err, errStep):
		t.Fatalf("forward: %v, want a forward *RankError of rank 2 wrapping the step's error", err)
	case ran.Load() != 4 || len(took) != 4:
		t.Fatalf("ran on %d ranks with %d durations, want 4 and 4", ran.Load(), len(took))
	}
	if _, err := g.Forward(ctx, nil); !errors.Is(err, gpuarena.ErrInvalidValue) {
		t.Fatalf("nil step: %v, want ErrInvalidValue", err)
	}
	if _, err := g.BuildArenas(ctx, plans(3)); !errors.Is(err, gpuarena.ErrInvalidValue) {
		t.Fatalf("3 plans for 4 ranks: %v, want ErrInvalidValue", err)
	}
}

// A group call from inside a group step returns ErrReentrant instead of
// waiting for itself.
func TestGroupCallsFromInsideAStep(t *testing.T) {
	ctx := context.Background()
	g, _ := newMachineGroup(t, machine(2, 0))
	if _, err := g.BuildArenas(ctx, plans(2)); err != nil {
		t.Fatal(err)
	}
	inner := make([]error, 2)
	if _, err := g.Forward(ctx, func(rank int, _ *device.Arena, _ device.Device) error {
		_, inner[rank] = g.Forward(ctx, func(int, *device.Arena, device.Device) error { return nil })
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for r, err := range inner {
		if !errors.Is(err, gpuarena.ErrReentrant) {
			t.Errorf("rank %d: forward from inside a step: %v, want ErrReentrant", r, err)
		}
	}
}

// A step waiting for the group's turn gives up when its context ends, and
// starts on no rank.
func TestGroupForwardWaitEndsWithItsContext(t *testing.T) {
	ctx := context.Background()
	g, _ := newMachineGroup(t, machine(2, 0))
	if _, err := g.BuildArenas(ctx, plans(2)); err != nil {
		t.Fatal(err)
	}
	entered, hold := make(chan struct{}, 2), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := g.Forward(ctx, func(int, *device.Arena, device.Device) error { entered <- struct{}{}; <-hold; return nil })
		first <- err
	}()
	<-entered
	<-entered
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	var ran atomic.Int32
	if _, err := g.Forward(cctx, func(int, *device.Arena, device.Device) error { ran.Add(1); return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("forward with a done context behind a running step: %v, want context.Canceled", err)
	}
	close(hold)
	if err := <-first; err != nil || ran.Load() != 0 {
		t.Fatalf("first step: %v; the cancelled step ran on %d ranks, want 0", err, ran.Load())
	}
}

// The group's collector exports every rank's series, each with its own
// device label.
func TestGroupCollectorLabelsEachDevice(t *testing.T) {
	ctx := context.Background()
	g, _ := newMachineGroup(t, machine(3, 0))
	if _, err := g.BuildArenas(ctx, plans(3)); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(g.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != gpuarena.MetricBytesInUse {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == gpuarena.LabelDevice {
					held[l.GetValue()] += m.GetGauge().GetValue()
				}
			}
		}
	}
	keys := make([]string, 0, len(held))
	for k, v := range held {
		keys = append(keys, k)
		if v < 10*testkit.MiB {
			t.Errorf("device %s: %v B in use, want at least the arena's 10 MiB", k, v)
		}
	}
	slices.Sort(keys)
	if strings.Join(keys, ",") != "0,1,2" {
		t.Fatalf("device labels %v, want 0,1,2", keys)
	}
}

func TestNewGroupRejectsBadOptions(t *testing.T) {
	sim := gpuworker.BackendConfig{}
	for name, opts := range map[string][]gpuarena.GroupOption{
		"no devices":    {gpuarena.WithRankOptions(quiet)},
		"nil option":    {gpuarena.WithDevices(sim), nil},
		"negative spin": {gpuarena.WithDevices(sim), gpuarena.WithGroupSpin(-time.Microsecond)},
		"nil factory":   {gpuarena.WithDeviceFactories(nil)},
		"utilization":   {gpuarena.WithDevices(sim, sim), gpuarena.WithRankOptions(gpuarena.WithGPUMemoryUtilization(2))},
		"17 devices":    {gpuarena.WithDevices(slices.Repeat([]gpuworker.BackendConfig{sim}, 17)...)},
	} {
		t.Run(name, func(t *testing.T) {
			g, err := gpuarena.NewGroup(opts...)
			if g != nil {
				g.Close()
			}
			var oe *arena.OptionError
			if !errors.As(err, &oe) || !errors.Is(err, gpuarena.ErrInvalidOption) {
				t.Fatalf("NewGroup: %v, want an *arena.OptionError", err)
			}
		})
	}
}

func TestGroupSpin(t *testing.T) {
	for _, tc := range []struct {
		ranks, procs int
		want         time.Duration
	}{
		{1, 1, 0}, {1, 2, gpuworker.DefaultSpin}, {2, 3, 0}, {2, 4, gpuworker.DefaultSpin},
		{8, 2, 0}, {8, 15, 0}, {8, 16, gpuworker.DefaultSpin}, {9, 16, 0}, {0, 16, 0},
	} {
		if got := gpuarena.GroupSpin(tc.ranks, tc.procs); got != tc.want {
			t.Errorf("GroupSpin(%d ranks, %d procs) = %v, want %v", tc.ranks, tc.procs, got, tc.want)
		}
	}
}
