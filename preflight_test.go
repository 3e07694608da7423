package gpuarena_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/internal/modelgen"
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
		if got := mustLedger(t, m).BytesByOwner(); got[device.WeightsOwner] != r.WeightBytes ||
			r.WeightBytes != r.CheckpointWeightBytes+r.WeightPaddingBytes || got[device.ArenaOwner] != r.ArenaBytes {
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

// The ledger matches the fit to the byte (issue item 5), with the pool's
// padding on its own line: a generated, sharded Qwen3-MoE checkpoint whose
// tensor sizes are not all multiples of 256 B, loaded pooled and built on
// hostsim, holds exactly the checkpoint's bytes plus the fit's padding for
// "weights" and the fit's arena bytes for "arena"; discrete, no padding.
func TestPreflightLedgerMatchesFit(t *testing.T) {
	ctx := context.Background()
	gen := modelgen.ForTest(t, "internal/modelgen/testdata/tiny-qwen3-moe.json", modelgen.Options{Seed: 5, Layers: 2, ShardBytes: 1_500_000})
	ck, err := checkpoint.Open(gen.Dir)
	if err != nil {
		t.Fatal(err)
	}
	// The padding counted tensor by tensor, apart from arena.PoolOffsets.
	var pad int64
	odd := 0
	for _, tn := range ck.Tensors() {
		if r := tn.Bytes % arena.PoolAlign; r != 0 {
			pad += arena.PoolAlign - r
			odd++
		}
	}
	ck.Close()
	if odd == 0 || len(gen.Manifest.Files) < 2 {
		t.Fatalf("%d tensors not a multiple of 256 B in %d shards; want some, sharded", odd, len(gen.Manifest.Files))
	}
	cfg, err := arena.LoadConfig(gen.Config)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := arena.PlanFor(cfg, arena.Options{MaxBatchTokens: 64, MaxSeqLen: 1024})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		layout  device.Layout
		wantPad int64
	}{{device.LayoutPooled, pad}, {device.LayoutDiscrete, 0}} {
		m, _ := countingManager(t, 1<<30)
		r, err := m.Preflight(ctx, plan, cfg, gpuarena.PreflightWeights(gen.Dir, tc.layout))
		if err != nil {
			t.Fatal(err)
		}
		if !r.Fits || r.CheckpointWeightBytes != gen.Manifest.TotalBytes || r.WeightPaddingBytes != tc.wantPad ||
			r.WeightBytes != gen.Manifest.TotalBytes+tc.wantPad {
			t.Fatalf("%s: fits %v, tensors %d B, padding %d B, weights %d B; want a fit, %d B + %d B",
				tc.layout, r.Fits, r.CheckpointWeightBytes, r.WeightPaddingBytes, r.WeightBytes, gen.Manifest.TotalBytes, tc.wantPad)
		}
		if _, err := m.LoadWeights(ctx, gen.Dir, gpuarena.WithWeightsLayout(tc.layout)); err != nil {
			t.Fatal(err)
		}
		if _, err := m.BuildArena(ctx, plan); err != nil {
			t.Fatal(err)
		}
		got := mustLedger(t, m).BytesByOwner()
		if got[device.WeightsOwner] != r.CheckpointWeightBytes+r.WeightPaddingBytes || got[device.ArenaOwner] != r.ArenaBytes {
			t.Errorf("%s: ledger by owner %v; the fit says weights %d + padding %d, arena %d",
				tc.layout, got, r.CheckpointWeightBytes, r.WeightPaddingBytes, r.ArenaBytes)
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
