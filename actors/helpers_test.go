package actors_test

import (
	"fmt"
	"testing"

	"github.com/gpuarena/gpuarena/actors"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/testkit"
)

const mib = testkit.MiB

var quiet = testkit.Discard

// memsetFailing wraps a HostSim and fails every Memset, to test the arena
// build's rollback when zero-filling norm_unit_w fails.
type memsetFailing struct{ *gpuworker.HostSim }

func (memsetFailing) Memset(device.DevicePtr, byte, int64) error {
	return fmt.Errorf("memset: %w", gpuworker.ErrInjected)
}

// dirtyAlloc fills every new allocation with 0xFF, as a reused device
// allocation can hold anything: the simulated device's fresh memory reads as
// zeros, which would hide a missing zero-fill.
type dirtyAlloc struct{ *gpuworker.HostSim }

func (d dirtyAlloc) Alloc(n int64) (device.DevicePtr, error) {
	p, err := d.HostSim.Alloc(n)
	if err == nil {
		err = d.HostSim.Memset(p, 0xFF, n)
	}
	return p, err
}

// faulty is a newRig wrap that injects plan's faults (gpuworker.WithFaults).
func faulty(plan gpuworker.Faults) func(*gpuworker.HostSim) gpuworker.Backend {
	return func(sim *gpuworker.HostSim) gpuworker.Backend { return gpuworker.WithFaults(sim, plan) }
}

// rig is a worker on a simulated device with its supervisors.
type rig struct {
	sim *gpuworker.HostSim
	w   *gpuworker.Worker
	s   *actors.Supervisors
}

func newRig(t *testing.T, cfg gpuworker.HostSimConfig, wrap func(*gpuworker.HostSim) gpuworker.Backend, opts ...actors.Option) *rig {
	t.Helper()
	system := testkit.NewActorSystem(t)
	sim, err := gpuworker.NewHostSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var b gpuworker.Backend = sim
	if wrap != nil {
		b = wrap(sim)
	}
	w, err := gpuworker.Start(system, func() (gpuworker.Backend, error) { return b, nil }, gpuworker.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{sim: sim, w: w, s: actors.Spawn(system, w, opts...)}
	t.Cleanup(func() { // before the system's own cleanup shuts it down
		r.s.Stop()
		w.Stop()
	})
	return r
}

// testPlan is testkit.SmallPlan with the FP8 row-wise slab's name.
func testPlan() *arena.Plan { return testkit.SmallPlan(arena.SlabSSMRowwiseW) }

// withSlabs is plan with its slabs replaced by slabs and its totals made to
// agree (arena.Plan.Validate checks them).
func withSlabs(plan *arena.Plan, slabs ...arena.SlabSpec) *arena.Plan {
	plan.Slabs, plan.SlabBytes = slabs, 0
	for _, s := range slabs {
		plan.SlabBytes += s.Bytes
	}
	plan.TotalBytes = plan.BufferBytes + plan.SlabBytes
	return plan
}
