package tests

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// badCase is one bad input: the call, the sentinel its error must wrap, and
// words its message must hold (naming what was wrong).
type badCase struct {
	name  string
	call  func() error
	want  error
	names []string
}

func runBad(t *testing.T, cases []badCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			for _, n := range c.names {
				if !strings.Contains(err.Error(), n) {
					t.Fatalf("error %q does not name %q", err, n)
				}
			}
		})
	}
}

// newErr is New's error, closing a manager it made by mistake.
func newErr(opts ...gpuarena.Option) error {
	m, err := gpuarena.New(append([]gpuarena.Option{quiet}, opts...)...)
	if err == nil {
		_ = m.Close()
		return errors.New("New accepted it")
	}
	return err
}

func TestBadInputNew(t *testing.T) {
	factory := func(b gpuworker.Backend, err error) gpuarena.Option {
		return gpuarena.WithBackendFactory(func() (gpuworker.Backend, error) { return b, err })
	}
	runBad(t, []badCase{
		{"nil option", func() error { return newErr(nil) }, gpuarena.ErrInvalidOption, []string{"options", "nil"}},
		{"utilization 0", func() error { return newErr(gpuarena.WithGPUMemoryUtilization(0)) }, gpuarena.ErrInvalidOption, []string{"gpu_memory_utilization"}},
		{"utilization > 1", func() error { return newErr(gpuarena.WithGPUMemoryUtilization(1.01)) }, gpuarena.ErrInvalidOption, []string{"gpu_memory_utilization"}},
		{"utilization NaN", func() error { return newErr(gpuarena.WithGPUMemoryUtilization(math.NaN())) }, gpuarena.ErrInvalidOption, []string{"gpu_memory_utilization"}},
		{"layout", func() error { return newErr(gpuarena.WithArenaLayout("striped")) }, gpuarena.ErrInvalidOption, []string{"arena_layout", "striped"}},
		{"negative spin", func() error { return newErr(gpuarena.WithDispatcherSpin(-1)) }, gpuarena.ErrInvalidOption, []string{"dispatcher_spin"}},
		{"nil backend factory", func() error { return newErr(gpuarena.WithBackendFactory(nil)) }, gpuarena.ErrInvalidOption, []string{"backend"}},
		{"nil logger", func() error { return newErr(gpuarena.WithLogger(nil)) }, gpuarena.ErrInvalidOption, []string{"logger"}},
		{"unknown backend kind", func() error { return newErr(gpuarena.WithBackend(gpuworker.BackendConfig{Kind: "tpu"})) }, gpuarena.ErrBackendNotBuiltIn, []string{"tpu", "hostsim"}},
		{"negative device capacity", func() error {
			return newErr(gpuarena.WithBackend(gpuworker.BackendConfig{HostSim: gpuworker.HostSimConfig{TotalBytes: -1}}))
		}, gpuarena.ErrInvalidValue, []string{"capacity"}},
		{"a device too small for any budget", func() error {
			return newErr(gpuarena.WithBackend(gpuworker.BackendConfig{HostSim: gpuworker.HostSimConfig{TotalBytes: 1}}))
		}, gpuarena.ErrOutOfMemory, []string{"gpu_memory_utilization"}},
		{"factory error", func() error { return newErr(factory(nil, gpuworker.ErrNoDevice)) }, gpuworker.ErrNoDevice, []string{"start gpu worker"}},
		{"factory returns no backend", func() error { return newErr(factory(nil, nil)) }, gpuarena.ErrInvalidValue, []string{"nil Backend"}},
		{"factory panics", func() error {
			return newErr(gpuarena.WithBackendFactory(func() (gpuworker.Backend, error) { panic("factory bug") }))
		}, gpuarena.ErrBackendPanic, []string{"open backend", "factory bug"}},
	})
}

func TestBadInputBuildArena(t *testing.T) {
	sim := newSim(t, gpuworker.HostSimConfig{TotalBytes: 64 * mib})
	m := simManager(t, sim)
	ctx := context.Background()
	plan := func(edit func(*arena.Plan)) *arena.Plan { p := smallPlan(); edit(p); return p }
	build := func(p *arena.Plan) func() error {
		return func() error { _, err := m.BuildArena(ctx, p); return err }
	}
	runBad(t, []badCase{
		{"nil plan", build(nil), gpuarena.ErrInvalidValue, []string{"nil plan"}},
		{"empty plan", build(&arena.Plan{}), gpuarena.ErrInvalidValue, []string{"no buffers", "arena.PlanFor"}},
		{"slab without a name", build(plan(func(p *arena.Plan) { p.Slabs[0].Name = "" })), gpuarena.ErrInvalidValue, []string{"empty name"}},
		{"slab named twice", build(plan(func(p *arena.Plan) { p.Slabs = append(p.Slabs, p.Slabs[0]) })), gpuarena.ErrInvalidValue, []string{`"w"`, "twice"}},
		{"slab of 0 B", build(plan(func(p *arena.Plan) { p.Slabs[0].Bytes = 0 })), gpuarena.ErrInvalidValue, []string{`"w"`, "> 0"}},
		{"buffer sizes that overflow", build(plan(func(p *arena.Plan) { p.Buffers[arena.Logits].Bytes = math.MaxInt64 })), arena.ErrOverflow, []string{"logits"}},
		{"larger than the device", build(plan(func(p *arena.Plan) {
			p.Buffers[arena.Logits].Shape, p.Buffers[arena.Logits].Bytes = []int64{512, 100 * 1024}, 100*mib
			p.BufferBytes, p.TotalBytes = 103*mib, 107*mib
		})), gpuarena.ErrOutOfMemory, []string{"arena_pool", "logits"}},
	})
	if l := agrees(t, m, sim); l.Counters.CurrentBytes != 0 {
		t.Fatalf("refused builds left %d B", l.Counters.CurrentBytes)
	}
	if _, err := m.BuildArena(ctx, smallPlan()); err != nil {
		t.Fatal(err)
	}
	runBad(t, []badCase{
		{"built twice", build(smallPlan()), gpuarena.ErrArenaBuilt, []string{"test"}},
	})
	if _, err := m.Release(ctx); err != nil {
		t.Fatal(err)
	}
	runBad(t, []badCase{
		{"after release", build(smallPlan()), gpuarena.ErrReleased, nil},
	})
	_ = m.Close()
	runBad(t, []badCase{
		{"after close", build(smallPlan()), gpuarena.ErrClosed, nil},
	})
}

func TestBadInputForward(t *testing.T) {
	sim := newSim(t, gpuworker.HostSimConfig{})
	m := simManager(t, sim)
	ctx := context.Background()
	forward := func(step func(*device.Arena, device.Device) error) func() error {
		return func() error { _, err := m.Forward(ctx, step); return err }
	}
	nop := func(*device.Arena, device.Device) error { return nil }
	runBad(t, []badCase{
		{"before build", forward(nop), gpuarena.ErrNoArena, nil},
		{"nil step", forward(nil), gpuarena.ErrInvalidValue, []string{"nil step"}},
	})
	if _, err := m.BuildArena(ctx, smallPlan()); err != nil {
		t.Fatal(err)
	}
	var kept device.Device
	runBad(t, []badCase{
		{"nil step", forward(nil), gpuarena.ErrInvalidValue, []string{"nil step"}},
		{"past the buffer", forward(func(a *device.Arena, dev device.Device) error {
			return dev.Memset(a.Ptr(arena.HiddenStates), 0, a.Bytes(arena.HiddenStates)+1)
		}), gpuworker.ErrOutOfRange, []string{"hidden_states"}},
		{"an absent buffer's NULL pointer", forward(func(a *device.Arena, dev device.Device) error {
			return dev.CopyHtoD(a.Ptr(arena.Residual), []byte{1})
		}), gpuworker.ErrNotAllocated, []string{"0x0"}},
		{"negative size", forward(func(a *device.Arena, dev device.Device) error {
			return dev.CopyDtoD(a.Ptr(arena.Logits), a.Ptr(arena.HiddenStates), -1)
		}), gpuarena.ErrInvalidValue, []string{"-1 B"}},
		{"device handle kept past the step", func() error {
			if err := forward(func(_ *device.Arena, dev device.Device) error { kept = dev; return nil })(); err != nil {
				return err
			}
			return kept.Memset(0, 0, 1)
		}, gpuworker.ErrStepOver, []string{"memset"}},
		{"step panics", forward(func(*device.Arena, device.Device) error { panic("step bug") }), gpuarena.ErrStepPanic, []string{"step bug"}},
	})
	if _, err := m.Release(ctx); err != nil {
		t.Fatal(err)
	}
	runBad(t, []badCase{{"after release", forward(nop), gpuarena.ErrReleased, nil}})
	_ = m.Close()
	runBad(t, []badCase{{"after close", forward(nop), gpuarena.ErrClosed, nil}})
}

func TestBadInputCarveSlab(t *testing.T) {
	sim := newSim(t, gpuworker.HostSimConfig{})
	m := simManager(t, sim)
	ctx := context.Background()
	carve := func(name string, n int64) func() error {
		return func() error { _, _, err := m.CarveSlab(ctx, name, n); return err }
	}
	runBad(t, []badCase{{"before build", carve("w", 256), gpuarena.ErrSlabAbsent, []string{"slabs: none"}}})
	if _, err := m.BuildArena(ctx, smallPlan()); err != nil {
		t.Fatal(err)
	}
	runBad(t, []badCase{
		{"0 B", carve("w", 0), arena.ErrInvalidCarve, []string{"asked 0 B"}},
		{"negative", carve("w", -5), arena.ErrInvalidCarve, []string{"asked -5 B"}},
		{"absent slab", carve("nope", 256), gpuarena.ErrSlabAbsent, []string{`"nope"`, "w 4194304 B"}},
		{"empty name", carve("", 256), gpuarena.ErrSlabAbsent, []string{`""`}},
		{"larger than the slab", carve("w", 4*mib+1), gpuarena.ErrSlabExhausted, []string{"asked 4194305 B", "of 4194304 B used"}},
		{"overflowing", carve("w", math.MaxInt64), gpuarena.ErrSlabExhausted, []string{"asked 9223372036854775807 B"}},
	})
	if _, _, err := m.CarveSlab(ctx, "w", 256); err != nil {
		t.Fatalf("a good carve after the bad ones: %v", err)
	}
	if _, err := m.Release(ctx); err != nil {
		t.Fatal(err)
	}
	runBad(t, []badCase{{"a released slab", carve("w", 256), gpuarena.ErrReleased, []string{"slab w"}}})
	_ = m.Close()
	runBad(t, []badCase{{"after close", carve("w", 256), gpuarena.ErrClosed, nil}})
}

// Release, Ledger, MemInfo and Stats after Close answer ErrClosed; Release
// before a build frees nothing, says ErrNoArena, and leaves the manager
// buildable.
func TestBadInputAfterClose(t *testing.T) {
	sim := newSim(t, gpuworker.HostSimConfig{})
	m := simManager(t, sim)
	ctx := context.Background()
	for range 2 {
		if r, err := m.Release(ctx); !errors.Is(err, gpuarena.ErrNoArena) || r.Freed != 0 {
			t.Fatalf("release with nothing built: %+v, %v; want ErrNoArena", r, err)
		}
	}
	if _, err := m.BuildArena(ctx, smallPlan()); err != nil {
		t.Fatalf("build after a release with nothing built: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	runBad(t, []badCase{
		{"release", func() error { _, err := m.Release(ctx); return err }, gpuarena.ErrClosed, nil},
		{"ledger", func() error { _, err := m.Ledger(ctx); return err }, gpuarena.ErrClosed, nil},
		{"meminfo", func() error { _, _, err := m.MemInfo(ctx); return err }, gpuarena.ErrClosed, nil},
		{"stats", func() error { _, err := m.Stats(ctx); return err }, gpuarena.ErrClosed, nil},
	})
}
