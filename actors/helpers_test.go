package actors_test

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena/actors"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/messages"
)

const mib = 1 << 20

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// memsetFailing wraps a HostSim and fails every Memset, to test the arena
// build's rollback when zero-filling norm_unit_w fails.
type memsetFailing struct{ *gpuworker.HostSim }

func (memsetFailing) Memset(messages.DevicePtr, byte, int64) error {
	return fmt.Errorf("memset: %w", gpuworker.ErrInjected)
}

// rig is a worker on a simulated device with its supervisors.
type rig struct {
	sim *gpuworker.HostSim
	w   *gpuworker.Worker
	s   *actors.Supervisors
}

func newRig(t *testing.T, cfg gpuworker.HostSimConfig, wrap func(*gpuworker.HostSim) gpuworker.Backend, opts ...actors.Option) *rig {
	t.Helper()
	system := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }),
		actor.WithDeadLetterThrottleInterval(time.Millisecond),
	)
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
	t.Cleanup(func() {
		r.s.Stop()
		w.Stop()
		system.Shutdown()
	})
	return r
}

// testPlan is a small hand-made plan: three present buffers (1, 2 and 3 MiB)
// and one slab of 4 MiB.
func testPlan() *arena.Plan {
	p := &arena.Plan{ModelType: "test"}
	for i := range p.Buffers {
		p.Buffers[i] = arena.Buffer{ID: arena.BufferID(i), Absent: "not in the test plan"}
	}
	p.Buffers[arena.HiddenStates] = arena.Buffer{ID: arena.HiddenStates, DType: arena.BF16, Shape: []int64{512, 1024}, Bytes: 1 * mib}
	p.Buffers[arena.NormUnitW] = arena.Buffer{ID: arena.NormUnitW, DType: arena.BF16, Shape: []int64{1024 * 1024}, Bytes: 2 * mib}
	p.Buffers[arena.Logits] = arena.Buffer{ID: arena.Logits, DType: arena.BF16, Shape: []int64{512, 3072}, Bytes: 3 * mib}
	p.Slabs = []arena.SlabSpec{{Name: "ssm_rowwise_w_bf16", Bytes: 4 * mib}}
	p.BufferBytes, p.SlabBytes, p.TotalBytes = 6*mib, 4*mib, 10*mib
	return p
}
