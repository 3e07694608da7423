package gpuarena_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// kvFit loads an example config, plans it with default options (or opts)
// and fits it on m's device as it is now (Manager.Preflight).
func kvFit(t *testing.T, m *gpuarena.Manager, file string, opts arena.Options) (*arena.ModelConfig, *arena.Plan, *arena.FitReport) {
	t.Helper()
	cfg, err := arena.LoadConfig("examples/configs/" + file)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := arena.PlanFor(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	fit, err := m.Preflight(context.Background(), plan, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !fit.Fits {
		t.Fatalf("%s does not fit on %d B: short by %d B", file, fit.Device.TotalBytes, fit.ShortfallBytes)
	}
	return cfg, plan, fit
}

// kvSpec is the spec of cfg with fit's counts, or fewer.
func kvSpec(t *testing.T, cfg *arena.ModelConfig, fit *arena.FitReport, req arena.KVCacheRequest) *arena.KVCacheSpec {
	t.Helper()
	spec, err := arena.NewKVCacheSpec(cfg, fit, req)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// kvHeld is the bytes the ledger holds for device.KVCacheOwner.
func kvHeld(t *testing.T, m *gpuarena.Manager) int64 {
	t.Helper()
	return mustLedger(t, m).Owners[device.KVCacheOwner].CurrentBytes
}

// TestBuildKVCacheLedgerEqualsFit: after a build with the fit's numbers
// the ledger holds the fit's KV memory for kv_cache to the byte, one
// allocation per group labelled with its name; a step writes and reads its
// blocks and slots and cannot cross from one layer into the next; Release
// frees it, a second build works, and Close frees that.
func TestBuildKVCacheLedgerEqualsFit(t *testing.T) {
	for _, c := range []struct {
		file   string
		total  int64
		groups []string
	}{
		{"llama-3.1-8b.json", 0, []string{arena.KVGroupFullAttention}},
		{"gpt-oss-20b.json", 0, []string{arena.KVGroupFullAttention, arena.KVGroupSlidingWindow}},
		{"qwen3-next-80b-a3b-thinking.json", 400 << 30, []string{arena.KVGroupFullAttention, arena.KVGroupGDNState}},
		{"nemotron-h-8b-base-8k.json", 0, []string{arena.KVGroupFullAttention, arena.KVGroupMamba2State}},
		{"deepseek-v3.json", 1 << 40, []string{arena.KVGroupMLA}},
	} {
		t.Run(c.file, func(t *testing.T) {
			ctx := context.Background()
			m, sim := countingManager(t, c.total)
			cfg, plan, fit := kvFit(t, m, c.file, arena.Options{MaxBatchTokens: 512})
			if _, err := m.BuildArena(ctx, plan); err != nil {
				t.Fatal(err)
			}
			kv, err := m.BuildKVCache(ctx, kvSpec(t, cfg, fit, arena.KVCacheRequest{}))
			if err != nil {
				t.Fatal(err)
			}
			want := fit.KVCacheBytes + fit.StateCacheBytes
			if held := kvHeld(t, m); held != want || kv.Bytes != want {
				t.Fatalf("ledger holds %d B for %s, the cache %d B; the fit's KV memory is %d B", held, device.KVCacheOwner, kv.Bytes, want)
			}
			t.Logf("%s: kv_cache %d B = kv %d B (%d blocks) + state %d B (%d sequences)", c.file, want, fit.KVCacheBytes, fit.KVBlocks, fit.StateCacheBytes, fit.StateSeqs)
			var labels []string
			for _, e := range mustLedger(t, m).Entries {
				if e.Owner == device.KVCacheOwner && e.Parent == 0 {
					labels = append(labels, e.Label)
				}
			}
			if len(labels) != len(c.groups) || len(kv.Groups) != len(c.groups) {
				t.Fatalf("allocations %v, want %v", labels, c.groups)
			}
			for i, g := range kv.Groups {
				if labels[i] != c.groups[i] || g.Name != c.groups[i] {
					t.Fatalf("allocation %d is %q (group %q), want %q", i, labels[i], g.Name, c.groups[i])
				}
			}
			allocs := sim.allocs.Load()
			stepOnCache(t, m, kv)
			if _, err := m.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if held := kvHeld(t, m); held != 0 {
				t.Fatalf("after Release the ledger holds %d B of kv cache", held)
			}
			if _, err := m.BuildKVCache(ctx, kv.Spec); err != nil || kvHeld(t, m) != want || sim.allocs.Load() != allocs+int64(len(c.groups)) {
				t.Fatalf("build after Release: %v; %d B held", err, kvHeld(t, m))
			}
			if err := m.Close(); err != nil || sim.BytesInUse() != 0 {
				t.Fatalf("Close: %v; the device still holds %d B", err, sim.BytesInUse())
			}
		})
	}
}

// stepOnCache writes a pattern to the last block (slot) of the last layer
// of every group in a forward step and reads it back, and checks that a copy
// from one layer into the next is refused (each layer is a ledger view).
func stepOnCache(t *testing.T, m *gpuarena.Manager, kv *device.KVCache) {
	t.Helper()
	pattern := []byte("kv cache block")
	_, err := m.Forward(context.Background(), func(_ *device.Arena, dev device.Device) error {
		for _, g := range kv.Groups {
			last := g.Layers[len(g.Layers)-1]
			var p device.DevicePtr
			var err error
			switch last.Planes {
			case 2:
				_, p, err = g.BlockAddr(last.Layer, g.Blocks-1) // the last block's V
			case 1:
				p, err = g.LatentAddr(last.Layer, g.Blocks-1)
			default:
				p, err = g.SlotAddr(last.Layer, g.Blocks-1)
			}
			if err != nil {
				return err
			}
			if err := dev.CopyHtoD(p, pattern); err != nil {
				return err
			}
			got := make([]byte, len(pattern))
			if err := dev.CopyDtoH(got, p); err != nil {
				return err
			}
			if string(got) != string(pattern) {
				t.Errorf("%s layer %d: read %q back", g.Name, last.Layer, got)
			}
			if len(g.Layers) > 1 {
				end := g.LayerPtrs[0] + device.DevicePtr(g.Layers[0].Bytes)
				if err := dev.CopyHtoD(end-4, pattern); !errors.Is(err, gpuarena.ErrOutOfRange) {
					t.Errorf("%s: a copy from layer %d into layer %d: %v, want ErrOutOfRange", g.Name, g.Layers[0].Layer, g.Layers[1].Layer, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestBuildKVCacheRefusals: bad input, a cache past the budget, a second
// build, a spec of another model and FreeOwner of kv_cache are refused
// with typed errors before any allocation.
func TestBuildKVCacheRefusals(t *testing.T) {
	ctx := context.Background()
	big, _ := countingManager(t, 1<<40)
	bigCfg, _, bigFit := kvFit(t, big, "llama-3.1-8b.json", arena.Options{MaxBatchTokens: 512})

	m, sim := countingManager(t, 0)
	cfg, _, fit := kvFit(t, m, "llama-3.1-8b.json", arena.Options{MaxBatchTokens: 512})
	blocks := int64(64)
	spec := kvSpec(t, cfg, fit, arena.KVCacheRequest{Blocks: &blocks})
	bad := *spec
	bad.Bytes++
	refusals := []struct {
		name string
		spec *arena.KVCacheSpec
		is   error
	}{
		{"nil spec", nil, gpuarena.ErrInvalidValue},
		{"spec that does not add up", &bad, arena.ErrKVCacheSpec},
		{"past the budget", kvSpec(t, bigCfg, bigFit, arena.KVCacheRequest{}), gpuarena.ErrOutOfMemory},
	}
	for _, r := range refusals {
		if _, err := m.BuildKVCache(ctx, r.spec); !errors.Is(err, r.is) {
			t.Fatalf("%s: %v, want %v", r.name, err, r.is)
		}
	}
	var oom *gpuworker.OutOfMemoryError
	_, err := m.BuildKVCache(ctx, refusals[2].spec)
	if !errors.As(err, &oom) || !oom.OverBudget || oom.ShortfallBytes <= 0 {
		t.Fatalf("past the budget: %v, want an *OutOfMemoryError over budget", err)
	}
	if n := sim.allocs.Load(); n != 0 || kvHeld(t, m) != 0 {
		t.Fatalf("refusals reached the device %d times, ledger holds %d B", n, kvHeld(t, m))
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.BuildKVCache(cctx, spec); !errors.Is(err, context.Canceled) || sim.allocs.Load() != 0 {
		t.Fatalf("cancelled: %v", err)
	}

	if _, err := m.BuildKVCache(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if _, err := m.BuildKVCache(ctx, spec); !errors.Is(err, gpuarena.ErrKVCacheBuilt) || kvHeld(t, m) != spec.Bytes {
		t.Fatalf("second build: %v; ledger holds %d B, want %d", err, kvHeld(t, m), spec.Bytes)
	}
	var oe *gpuarena.OwnerError
	if _, err := m.FreeOwner(ctx, device.KVCacheOwner); !errors.As(err, &oe) || !errors.Is(err, gpuarena.ErrReservedOwner) {
		t.Fatalf("FreeOwner(%q): %v, want an *OwnerError", device.KVCacheOwner, err)
	}
	if _, err := m.Alloc(ctx, "mine", 1<<20, gpuarena.WithOwner(device.KVCacheOwner)); !errors.Is(err, gpuarena.ErrReservedOwner) {
		t.Fatalf("Alloc for %q: %v", device.KVCacheOwner, err)
	}
}

// TestBuildKVCacheOtherModel: a spec of another model than the built
// arena's is refused.
func TestBuildKVCacheOtherModel(t *testing.T) {
	ctx := context.Background()
	m, sim := countingManager(t, 0)
	cfg, _, fit := kvFit(t, m, "llama-3.1-8b.json", arena.Options{MaxBatchTokens: 512})
	_, plan, _ := kvFit(t, m, "qwen3-8b.json", arena.Options{MaxBatchTokens: 512})
	if _, err := m.BuildArena(ctx, plan); err != nil {
		t.Fatal(err)
	}
	allocs := sim.allocs.Load()
	blocks := int64(8)
	var ke *arena.KVCacheError
	_, err := m.BuildKVCache(ctx, kvSpec(t, cfg, fit, arena.KVCacheRequest{Blocks: &blocks}))
	if !errors.As(err, &ke) || !errors.Is(err, arena.ErrKVCacheMismatch) || ke.Field != "model_type" || sim.allocs.Load() != allocs {
		t.Fatalf("llama spec on a qwen3 arena: %v", err)
	}
}

// TestBuildKVCacheReleaseKeepsGoing: a free that fails leaves that group in
// the ledger and Release frees the others; the next Release frees the rest.
func TestBuildKVCacheReleaseKeepsGoing(t *testing.T) {
	ctx := context.Background()
	sim, err := gpuworker.NewHostSim(gpuworker.HostSimConfig{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := gpuarena.New(quiet, gpuarena.WithBackendFactory(func() (gpuworker.Backend, error) {
		return gpuworker.WithFaults(sim, gpuworker.Faults{FailFreeAt: 1}), nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	}()
	cfg, _, fit := kvFit(t, m, "gpt-oss-20b.json", arena.Options{MaxBatchTokens: 512})
	blocks, seqs := int64(32), int64(4)
	kv, err := m.BuildKVCache(ctx, kvSpec(t, cfg, fit, arena.KVCacheRequest{Blocks: &blocks, Seqs: &seqs}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Release(ctx); !errors.Is(err, gpuworker.ErrInjected) {
		t.Fatalf("Release with a failing free: %v", err)
	}
	// FreeOwner frees newest first: the sliding-window group's free failed.
	if held := kvHeld(t, m); held != kv.Groups[1].Bytes {
		t.Fatalf("after the failed free the ledger holds %d B, want the sliding group's %d B", held, kv.Groups[1].Bytes)
	}
	if _, err := m.Release(ctx); err != nil && !errors.Is(err, gpuarena.ErrNoArena) {
		t.Fatal(err)
	}
	if held := kvHeld(t, m); held != 0 {
		t.Fatalf("after the second Release the ledger holds %d B", held)
	}
}

// TestBuildKVCacheConcurrent: of concurrent builds exactly one allocates;
// the others get ErrKVCacheBuilt.
func TestBuildKVCacheConcurrent(t *testing.T) {
	m, _ := countingManager(t, 0)
	cfg, _, fit := kvFit(t, m, "qwen3-8b.json", arena.Options{MaxBatchTokens: 512})
	blocks := int64(16)
	spec := kvSpec(t, cfg, fit, arena.KVCacheRequest{Blocks: &blocks})
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = m.BuildKVCache(context.Background(), spec) })
	}
	wg.Wait()
	built := 0
	for _, err := range errs {
		switch {
		case err == nil:
			built++
		case !errors.Is(err, gpuarena.ErrKVCacheBuilt):
			t.Fatal(err)
		}
	}
	if built != 1 || kvHeld(t, m) != spec.Bytes {
		t.Fatalf("%d builds succeeded, ledger holds %d B, want 1 and %d B", built, kvHeld(t, m), spec.Bytes)
	}
}
