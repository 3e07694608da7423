package tests

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/messages"
)

func TestBadInputWorkerStart(t *testing.T) {
	start := func(f gpuworker.BackendFactory, opts ...gpuworker.WorkerOption) func() error {
		return func() error {
			w, err := gpuworker.Start(newSystem(t), f, opts...)
			if err == nil {
				w.Stop()
				return errors.New("Start accepted it")
			}
			return err
		}
	}
	sim := gpuworker.BackendConfig{}.Factory()
	runBad(t, []badCase{
		{"nil factory", start(nil), gpuworker.ErrInvalidValue, []string{"nil backend factory"}},
		{"nil option", start(sim, nil), gpuworker.ErrInvalidValue, []string{"option 1 is nil"}},
		{"nil logger", start(sim, gpuworker.WithLogger(nil)), gpuworker.ErrInvalidValue, []string{"nil logger"}},
		{"negative spin", start(sim, gpuworker.WithSpin(-1)), gpuworker.ErrInvalidValue, []string{"spin"}},
		{"utilization > 1", start(sim, gpuworker.WithGPUMemoryUtilization(2)), gpuworker.ErrInvalidValue, []string{"gpu_memory_utilization"}},
		{"utilization < 0", start(sim, gpuworker.WithGPUMemoryUtilization(-0.5)), gpuworker.ErrInvalidValue, []string{"gpu_memory_utilization"}},
		{"utilization NaN", start(sim, gpuworker.WithGPUMemoryUtilization(math.NaN())), gpuworker.ErrInvalidValue, []string{"gpu_memory_utilization"}},
		{"negative capacity", func() error { _, err := gpuworker.NewHostSim(gpuworker.HostSimConfig{TotalBytes: -1}); return err }, gpuworker.ErrInvalidValue, []string{"capacity"}},
	})
}

func TestBadInputWorkerCalls(t *testing.T) {
	sim := newSim(t, gpuworker.HostSimConfig{TotalBytes: 64 * mib})
	w := simWorker(t, sim)
	ctx := context.Background()
	p, err := w.Alloc(ctx, "alice", "p", mib)
	if err != nil {
		t.Fatal(err)
	}
	q, err := w.Alloc(ctx, "alice", "q", mib)
	if err != nil {
		t.Fatal(err)
	}
	ptrs, _, err := w.AllocBatch(ctx, "alice", []messages.AllocItem{{Label: "pool", Bytes: 4096, Views: []messages.PoolView{{Label: "v1", Offset: 0, Bytes: 1024}, {Label: "v2", Offset: 1024, Bytes: 1024}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool := ptrs[0]
	freed, err := w.Alloc(ctx, "alice", "freed", mib)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Free(ctx, "alice", freed); err != nil {
		t.Fatal(err)
	}
	alloc := func(label string, n int64) func() error {
		return func() error { _, err := w.Alloc(ctx, "alice", label, n); return err }
	}
	runBad(t, []badCase{
		{"alloc 0 B", alloc("zero", 0), gpuworker.ErrInvalidValue, []string{"zero", "0 B"}},
		{"alloc < 0 B", alloc("neg", -1), gpuworker.ErrInvalidValue, []string{"neg", "-1 B"}},
		{"alloc past the device", alloc("huge", math.MaxInt64), gpuworker.ErrOutOfMemory, []string{"huge"}},
		{"batch with a 0 B item", func() error {
			_, _, err := w.AllocBatch(ctx, "alice", []messages.AllocItem{{Label: "ok", Bytes: 16}, {Label: "empty", Bytes: 0}}, nil)
			return err
		}, gpuworker.ErrInvalidValue, []string{"item 2 of 2", "empty"}},
		{"pool views overlapping", func() error {
			_, _, err := w.AllocBatch(ctx, "alice", []messages.AllocItem{{Label: "p2", Bytes: 4096, Views: []messages.PoolView{{Label: "a", Offset: 0, Bytes: 2048}, {Label: "b", Offset: 1024, Bytes: 16}}}}, nil)
			return err
		}, gpuworker.ErrInvalidValue, []string{"view b"}},
		{"pool view outside", func() error {
			_, _, err := w.AllocBatch(ctx, "alice", []messages.AllocItem{{Label: "p3", Bytes: 4096, Views: []messages.PoolView{{Label: "a", Offset: 4000, Bytes: 200}}}}, nil)
			return err
		}, gpuworker.ErrInvalidValue, []string{"view a"}},
		{"pool view overflowing", func() error {
			_, _, err := w.AllocBatch(ctx, "alice", []messages.AllocItem{{Label: "p4", Bytes: 4096, Views: []messages.PoolView{{Label: "a", Offset: math.MaxInt64, Bytes: math.MaxInt64}}}}, nil)
			return err
		}, gpuworker.ErrInvalidValue, []string{"view a"}},
		{"free NULL", func() error { return w.Free(ctx, "alice", 0) }, gpuworker.ErrNotAllocated, []string{"0x0"}},
		{"free an interior pointer", func() error { return w.Free(ctx, "alice", p+8) }, gpuworker.ErrNotAllocated, nil},
		{"free by another owner", func() error { return w.Free(ctx, "bob", p) }, gpuworker.ErrNotOwner, []string{`"alice"`, `"bob"`}},
		{"double free", func() error { return w.Free(ctx, "alice", freed) }, gpuworker.ErrNotAllocated, nil},
		{"free batch with a stranger's pointer", func() error { _, err := w.FreeBatch(ctx, "bob", []device.DevicePtr{q}); return err }, gpuworker.ErrNotOwner, []string{`"bob"`}},
		{"memset NULL", func() error { return w.Memset(ctx, 0, 1, 1) }, gpuworker.ErrNotAllocated, nil},
		{"memset past the end", func() error { return w.Memset(ctx, p+mib-1, 1, 2) }, gpuworker.ErrOutOfRange, []string{"p"}},
		{"memset < 0 B", func() error { return w.Memset(ctx, p, 1, -1) }, gpuworker.ErrInvalidValue, nil},
		{"memset across two pool views", func() error { return w.Memset(ctx, pool+1000, 1, 48) }, gpuworker.ErrOutOfRange, []string{"v1"}},
		{"memset a freed allocation", func() error { return w.Memset(ctx, freed, 1, 1) }, gpuworker.ErrNotAllocated, nil},
		{"copy host→device past the end", func() error { return w.CopyHtoD(ctx, q, make([]byte, mib+1)) }, gpuworker.ErrOutOfRange, []string{"q"}},
		{"copy device→host < 0 B", func() error { _, err := w.CopyDtoH(ctx, p, -1); return err }, gpuworker.ErrInvalidValue, nil},
		{"copy device→host past the end", func() error { _, err := w.CopyDtoH(ctx, p, mib+1); return err }, gpuworker.ErrOutOfRange, nil},
		{"copy device→device into a freed allocation", func() error { return w.CopyDtoD(ctx, freed, p, 16) }, gpuworker.ErrNotAllocated, []string{"destination"}},
		{"forward nil step", func() error { _, err := w.Forward(ctx, nil); return err }, gpuworker.ErrInvalidValue, []string{"nil step"}},
		{"view of another owner's allocation", func() error {
			return w.AddView(ctx, "bob", p, messages.PoolView{Label: "v", Offset: 0, Bytes: 16})
		}, gpuworker.ErrNotOwner, nil},
		{"view overlapping another", func() error {
			return w.AddView(ctx, "alice", pool, messages.PoolView{Label: "v3", Offset: 1000, Bytes: 100})
		}, gpuworker.ErrInvalidValue, []string{"v3"}},
		{"view outside its parent", func() error {
			return w.AddView(ctx, "alice", pool, messages.PoolView{Label: "v4", Offset: 4096, Bytes: 1})
		}, gpuworker.ErrInvalidValue, []string{"v4"}},
	})
	if freed, _, err := w.FreeOwner(ctx, "nobody"); err != nil || freed != 0 {
		t.Fatalf("freeing an owner with nothing: %d freed, %v", freed, err)
	}
	// Nothing above kept an allocation or freed one of alice's: she still
	// holds p, q and the pool. The batch was refused before its good item was
	// allocated (allocations 4, frees 1); the device refused one (huge).
	l := agrees(t, w, sim)
	if l.Owners["alice"].CurrentBytes != 2*mib+4096 || l.Counters.Allocations != 4 || l.Counters.Frees != 1 || l.Counters.Failures != 1 {
		t.Fatalf("after the bad calls: owners %+v, counters %+v", l.Owners, l.Counters)
	}
}
