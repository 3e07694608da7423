package gpuarena_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
)

// tinyLlama is the config of llamaTensors' model, and a plan for it.
func tinyLlama(t *testing.T) (*arena.ModelConfig, *arena.Plan) {
	t.Helper()
	cfg, err := arena.ParseConfig([]byte(`{"model_type": "llama", "hidden_size": 72, "intermediate_size": 200,
		"num_hidden_layers": 2, "num_attention_heads": 6, "num_key_value_heads": 2, "vocab_size": 1000,
		"max_position_embeddings": 4096, "torch_dtype": "bfloat16"}`))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := arena.PlanFor(cfg, arena.Options{MaxBatchTokens: 64, MaxSeqLen: 1024})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, plan
}

// Invariant 6 on the manager's own device state: on a device whose capacity
// is exactly what the preflight says is needed, the load and the build
// succeed; one byte less and the preflight says "does not fit" by 1 byte.
func TestPreflightExactCapacity(t *testing.T) {
	ctx := context.Background()
	dir, man := writeLlama(t)
	cfg, plan := tinyLlama(t)
	for _, u := range []struct {
		f          float64
		num, denom int64 // f as a fraction
	}{{1, 1, 1}, {0.9, 9, 10}} {
		// What is needed does not depend on the capacity: ask a large device.
		probe, _ := countingManager(t, 1<<30, gpuarena.WithGPUMemoryUtilization(u.f))
		r, err := probe.Preflight(ctx, plan, cfg, gpuarena.PreflightWeights(dir, device.LayoutPooled))
		if err != nil {
			t.Fatal(err)
		}
		if !r.Fits || r.WeightSource != "checkpoint" || r.WeightBytes <= man.TotalBytes || r.ReserveBytes != 0 || r.UsedByOthersBytes != 0 {
			t.Fatalf("u=%g: preflight on 1 GiB: %+v; want a fit counting the checkpoint's pooled bytes, no reserve, nothing used", u.f, r)
		}
		need := r.RequiredBytes
		// The smallest capacity whose ⌊u × capacity⌋ is need.
		capacity := (need*u.denom + u.num - 1) / u.num

		m, sim := countingManager(t, capacity, gpuarena.WithGPUMemoryUtilization(u.f))
		r, err = m.Preflight(ctx, plan, cfg, gpuarena.PreflightWeights(dir, device.LayoutPooled))
		if err != nil || !r.Fits || r.RequiredBytes != need || r.BudgetBytes != need || r.HeadroomBytes != 0 {
			t.Fatalf("u=%g capacity %d: %+v, %v; want a fit with no headroom", u.f, capacity, r, err)
		}
		w, err := m.LoadWeights(ctx, dir)
		if err != nil {
			t.Fatalf("u=%g: load after a fitting preflight: %v", u.f, err)
		}
		if w.AllocatedBytes != r.WeightBytes {
			t.Fatalf("the load allocated %d B, the preflight counted %d", w.AllocatedBytes, r.WeightBytes)
		}
		if _, err := m.BuildArena(ctx, plan); err != nil {
			t.Fatalf("u=%g: build after a fitting preflight and the load: %v", u.f, err)
		}
		// The ledger matches the fit to the byte (issue item 5).
		if got := mustLedger(t, m).BytesByOwner(); got[device.WeightsOwner] != r.WeightBytes || got[device.ArenaOwner] != r.ArenaBytes {
			t.Fatalf("ledger by owner %v; the fit says weights %d, arena %d", got, r.WeightBytes, r.ArenaBytes)
		}
		// What the ledger holds now counts as used: the same plan again
		// does not fit.
		if r2, err := m.Preflight(ctx, plan, cfg); err != nil || r2.Fits || r2.UsedByOthersBytes != sim.BytesInUse() {
			t.Fatalf("u=%g: preflight with everything held: %+v, %v; want no fit, %d B used", u.f, r2, err, sim.BytesInUse())
		}

		small, _ := countingManager(t, capacity-1, gpuarena.WithGPUMemoryUtilization(u.f))
		r, err = small.Preflight(ctx, plan, cfg, gpuarena.PreflightWeights(dir, device.LayoutPooled))
		if err != nil || r.Fits || r.ShortfallBytes != 1 {
			t.Fatalf("u=%g capacity %d: %+v, %v; want no fit, short by 1 B", u.f, capacity-1, r, err)
		}
	}
}

func TestPreflightBadInput(t *testing.T) {
	ctx := context.Background()
	cfg, plan := tinyLlama(t)
	m, _ := countingManager(t, 0)
	if _, err := m.Preflight(ctx, plan, cfg, nil); !errors.Is(err, gpuarena.ErrInvalidValue) {
		t.Errorf("nil option: %v", err)
	}
	if _, err := m.Preflight(ctx, plan, cfg, gpuarena.PreflightReserve(-1)); !errors.Is(err, gpuarena.ErrInvalidValue) {
		t.Errorf("negative reserve: %v", err)
	}
	if _, err := m.Preflight(ctx, nil, cfg); err == nil {
		t.Errorf("nil plan: no error")
	}
	if _, err := m.Preflight(ctx, plan, cfg, gpuarena.PreflightWeights(t.TempDir(), "")); err == nil {
		t.Errorf("an empty folder as weights: no error")
	}
	r, err := m.Preflight(ctx, plan, cfg, gpuarena.PreflightReserve(1<<20))
	if err != nil || r.ReserveBytes != 1<<20 || r.WeightSource != "estimate" {
		t.Errorf("reserve 1 MiB: %+v, %v", r, err)
	}
}
