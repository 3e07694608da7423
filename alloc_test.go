package gpuarena_test

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/testkit"
)

// countingSim is hostsim that counts the allocations that reach it, so a
// test can tell a budget refusal (no driver call) from a device one.
type countingSim struct {
	*gpuworker.HostSim
	allocs atomic.Int64
}

func (c *countingSim) Alloc(bytes int64) (device.DevicePtr, error) {
	c.allocs.Add(1)
	return c.HostSim.Alloc(bytes)
}

// simManager starts a manager on a counting hostsim of total bytes (0: the
// default) and closes it when the test ends.
func countingManager(t *testing.T, total int64, opts ...gpuarena.Option) (*gpuarena.Manager, *countingSim) {
	t.Helper()
	sim, err := gpuworker.NewHostSim(gpuworker.HostSimConfig{TotalBytes: total})
	if err != nil {
		t.Fatal(err)
	}
	c := &countingSim{HostSim: sim}
	m, err := gpuarena.New(append([]gpuarena.Option{quiet, gpuarena.WithBackendFactory(func() (gpuworker.Backend, error) { return c, nil })}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	return m, c
}

func mustLedger(t *testing.T, m *gpuarena.Manager) device.Ledger {
	t.Helper()
	l, err := m.Ledger(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if l.Counters.CurrentBytes != l.BackendBytesInUse {
		t.Fatalf("ledger holds %d B, backend %d B: invariant 3", l.Counters.CurrentBytes, l.BackendBytesInUse)
	}
	return l
}

const mib = 1 << 20

func TestAllocFreeAndOwners(t *testing.T) {
	ctx := context.Background()
	m, sim := countingManager(t, 0)
	a, err := m.Alloc(ctx, "rope_table", 3*mib)
	if err != nil {
		t.Fatal(err)
	}
	if a.Ptr == 0 || a.Bytes != 3*mib || a.Label != "rope_table" || a.Owner != device.UserOwner {
		t.Fatalf("Alloc = %+v, want 3 MiB rope_table of %q", a, device.UserOwner)
	}
	b, err := m.Alloc(ctx, "sampling", mib, gpuarena.WithOwner("sampler"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.Alloc(ctx, "topk", 2*mib, gpuarena.WithOwner("sampler"))
	if err != nil {
		t.Fatal(err)
	}
	l := mustLedger(t, m)
	if got := l.BytesByOwner(); got[device.UserOwner] != 3*mib || got["sampler"] != 3*mib || len(got) != 2 {
		t.Fatalf("bytes by owner %v, want user 3 MiB and sampler 3 MiB", got)
	}
	for _, e := range l.Entries {
		if e.Ptr == b.Ptr && (e.Label != "sampling" || e.Owner != "sampler" || e.Bytes != mib) {
			t.Fatalf("ledger entry %+v, want sampling of sampler, 1 MiB", e)
		}
	}
	if err := m.Free(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := m.Free(ctx, a); !errors.Is(err, gpuarena.ErrNotAllocated) {
		t.Fatalf("second free: %v, want ErrNotAllocated", err)
	}
	wrong := b
	wrong.Owner = "someone"
	if err := m.Free(ctx, wrong); !errors.Is(err, gpuworker.ErrNotOwner) {
		t.Fatalf("free under another owner: %v, want ErrNotOwner", err)
	}
	r, err := m.FreeOwner(ctx, "sampler")
	if err != nil || r.Freed != 2 || r.Bytes != 3*mib {
		t.Fatalf("FreeOwner = %+v, %v; want 2 allocations, 3 MiB", r, err)
	}
	if r, err := m.FreeOwner(ctx, "sampler"); err != nil || r.Freed != 0 || r.Bytes != 0 {
		t.Fatalf("second FreeOwner = %+v, %v; want nothing freed", r, err)
	}
	if err := m.Free(ctx, c); !errors.Is(err, gpuarena.ErrNotAllocated) {
		t.Fatalf("free after FreeOwner: %v, want ErrNotAllocated", err)
	}
	if l := mustLedger(t, m); l.Counters.CurrentBytes != 0 || sim.BytesInUse() != 0 {
		t.Fatalf("ledger %d B, backend %d B after every free, want 0", l.Counters.CurrentBytes, sim.BytesInUse())
	}
	if n := sim.allocs.Load(); n != 3 {
		t.Fatalf("%d allocations reached the backend, want 3", n)
	}
}

func TestAllocBadInput(t *testing.T) {
	ctx := context.Background()
	m, sim := countingManager(t, 0)
	bad := []struct {
		name  string
		label string
		bytes int64
		opts  []gpuarena.AllocOption
		want  error
	}{
		{"zero bytes", "x", 0, nil, gpuarena.ErrInvalidValue},
		{"negative bytes", "x", -1, nil, gpuarena.ErrInvalidValue},
		{"min int64", "x", -1 << 63, nil, gpuarena.ErrInvalidValue},
		{"empty label", "", mib, nil, gpuarena.ErrInvalidValue},
		{"empty owner", "x", mib, []gpuarena.AllocOption{gpuarena.WithOwner("")}, gpuarena.ErrInvalidValue},
		{"nil option", "x", mib, []gpuarena.AllocOption{nil}, gpuarena.ErrInvalidValue},
		{"arena owner", "x", mib, []gpuarena.AllocOption{gpuarena.WithOwner(device.ArenaOwner)}, gpuarena.ErrReservedOwner},
		{"slab owner", "x", mib, []gpuarena.AllocOption{gpuarena.WithOwner(device.SlabOwner("w"))}, gpuarena.ErrReservedOwner},
		{"weights owner", "x", mib, []gpuarena.AllocOption{gpuarena.WithOwner(device.WeightsOwner)}, gpuarena.ErrReservedOwner},
		{"kv owner", "x", mib, []gpuarena.AllocOption{gpuarena.WithOwner(device.KVCacheOwner)}, gpuarena.ErrReservedOwner},
	}
	for _, c := range bad {
		a, err := m.Alloc(ctx, c.label, c.bytes, c.opts...)
		if !errors.Is(err, c.want) || a != (device.Allocation{}) {
			t.Errorf("%s: Alloc = %+v, %v; want %v", c.name, a, err, c.want)
		}
	}
	var oe *gpuarena.OwnerError
	if _, err := m.FreeOwner(ctx, device.ArenaOwner); !errors.As(err, &oe) || oe.Owner != device.ArenaOwner || oe.Op != "free owner" {
		t.Errorf("FreeOwner(arena): %v, want an *OwnerError naming it", err)
	}
	if err := m.Free(ctx, device.Allocation{Ptr: 1, Bytes: 1, Owner: device.WeightsOwner}); !errors.Is(err, gpuarena.ErrReservedOwner) {
		t.Errorf("Free of a weights allocation: %v, want ErrReservedOwner", err)
	}
	if _, err := m.FreeOwner(ctx, ""); !errors.Is(err, gpuarena.ErrInvalidValue) {
		t.Errorf("FreeOwner(\"\"): %v, want ErrInvalidValue", err)
	}
	if err := m.Free(ctx, device.Allocation{Ptr: 12345, Bytes: 1, Label: "never", Owner: device.UserOwner}); !errors.Is(err, gpuarena.ErrNotAllocated) {
		t.Errorf("Free of a pointer never allocated: %v, want ErrNotAllocated", err)
	}
	if n := sim.allocs.Load(); n != 0 || sim.BytesInUse() != 0 {
		t.Fatalf("bad input reached the backend: %d allocations, %d B in use", n, sim.BytesInUse())
	}
}

// An allocation past the budget is refused before the driver is called,
// with the typed out-of-memory error; the budget's last byte is allocatable.
func TestAllocOverBudget(t *testing.T) {
	ctx := context.Background()
	m, sim := countingManager(t, 100*mib, gpuarena.WithGPUMemoryUtilization(0.5))
	if m.Budget() != 50*mib {
		t.Fatalf("budget %d, want 50 MiB", m.Budget())
	}
	if _, err := m.Alloc(ctx, "held", 20*mib); err != nil {
		t.Fatal(err)
	}
	_, err := m.Alloc(ctx, "too_big", 30*mib+1, gpuarena.WithOwner("scratch"))
	var oom *gpuworker.OutOfMemoryError
	if !errors.As(err, &oom) || !errors.Is(err, gpuarena.ErrOutOfMemory) || !oom.OverBudget || oom.Bytes != 30*mib+1 ||
		oom.Label != "too_big" || oom.Owner != "scratch" || oom.Budget != 50*mib || oom.HeldByOwner[device.UserOwner] != 20*mib {
		t.Fatalf("Alloc past the budget: %v, want an OverBudget *OutOfMemoryError for too_big", err)
	}
	if n := sim.allocs.Load(); n != 1 {
		t.Fatalf("%d allocations reached the backend, want 1 (the refused one must not)", n)
	}
	if _, err := m.Alloc(ctx, "exact", 30*mib); err != nil {
		t.Fatalf("Alloc of the budget's last 30 MiB: %v", err)
	}
	if l := mustLedger(t, m); l.Counters.CurrentBytes != 50*mib || l.Counters.Failures != 1 {
		t.Fatalf("ledger %+v, want 50 MiB held and 1 failure", l.Counters)
	}
}

// A forward step uses an embedder's allocation like an arena buffer, and
// its ranges are checked against it.
func TestAllocUsableInStep(t *testing.T) {
	ctx := context.Background()
	m, _ := countingManager(t, 0)
	if _, err := m.BuildArena(ctx, testkit.SmallPlan("w")); err != nil {
		t.Fatal(err)
	}
	a, err := m.Alloc(ctx, "rope_table", 4096)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4096)
	_, err = m.Forward(ctx, func(_ *device.Arena, dev device.Device) error {
		if err := dev.Memset(a.Ptr, 0x5a, a.Bytes); err != nil {
			return err
		}
		if err := dev.CopyHtoD(a.Ptr+100, []byte("rope")); err != nil {
			return err
		}
		if err := dev.Memset(a.Ptr+1, 0, a.Bytes); !errors.Is(err, gpuarena.ErrOutOfRange) {
			return errors.New("a memset one byte past the allocation was not refused with ErrOutOfRange")
		}
		return dev.CopyDtoH(got, a.Ptr)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte{0x5a}, 4096)
	copy(want[100:], "rope")
	if !bytes.Equal(got, want) {
		t.Fatalf("read back %q…, want 0x5a with \"rope\" at 100", got[96:108])
	}
}

// Release and Close free the embedder's allocations too: exhaustive and
// idempotent.
func TestReleaseFreesUserAllocations(t *testing.T) {
	ctx := context.Background()
	m, sim := countingManager(t, 0)
	plan := testkit.SmallPlan("w")
	if _, err := m.BuildArena(ctx, plan); err != nil {
		t.Fatal(err)
	}
	for i, o := range []string{device.UserOwner, "sampler", "sampler"} {
		if _, err := m.Alloc(ctx, "buf", int64(i+1)*mib, gpuarena.WithOwner(o)); err != nil {
			t.Fatal(err)
		}
	}
	r, err := m.Release(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The pooled arena (6 MiB of buffers, one allocation) and its slab, then 3 user allocations.
	if r.Freed != 2+3 || r.Bytes != plan.TotalBytes+6*mib {
		t.Fatalf("Release = %+v, want 5 allocations, %d B", r, plan.TotalBytes+6*mib)
	}
	if l := mustLedger(t, m); l.Counters.CurrentBytes != 0 || sim.BytesInUse() != 0 {
		t.Fatalf("after Release: ledger %d B, backend %d B; want 0", l.Counters.CurrentBytes, sim.BytesInUse())
	}
	if r, err := m.Release(ctx); err != nil || r.Freed != 0 {
		t.Fatalf("second Release = %+v, %v; want nothing freed", r, err)
	}
	// Allocations made after a release are freed by Close.
	if _, err := m.Alloc(ctx, "late", mib); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if sim.BytesInUse() != 0 {
		t.Fatalf("after Close the backend holds %d B", sim.BytesInUse())
	}
}

// Release before any build frees the embedder's allocations and still says
// ErrNoArena.
func TestReleaseBeforeBuildFreesUserAllocations(t *testing.T) {
	ctx := context.Background()
	m, sim := countingManager(t, 0)
	if _, err := m.Alloc(ctx, "buf", mib); err != nil {
		t.Fatal(err)
	}
	r, err := m.Release(ctx)
	if !errors.Is(err, gpuarena.ErrNoArena) || r.Freed != 1 || r.Bytes != mib || sim.BytesInUse() != 0 {
		t.Fatalf("Release = %+v, %v (backend %d B); want 1 allocation of 1 MiB freed and ErrNoArena", r, err, sim.BytesInUse())
	}
}
