package gpuarena_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/testkit"
)

// llamaTensors are the tensors of a tiny Llama (modeling_llama.py's names):
// hidden 72, 2 layers, 6 query heads and 2 KV heads of 12, intermediate
// 200, vocabulary 1000, BF16. No size is a multiple of 256, so the pooled
// layout pads between every two tensors.
func llamaTensors() []checkpoint.TensorSpec {
	const h, kv, inter, vocab = 72, 24, 200, 1000
	ts := []checkpoint.TensorSpec{{Name: "model.embed_tokens.weight", DType: checkpoint.BF16, Shape: []int64{vocab, h}}}
	for l := range 2 {
		p := fmt.Sprintf("model.layers.%d.", l)
		ts = append(ts,
			checkpoint.TensorSpec{Name: p + "input_layernorm.weight", DType: checkpoint.BF16, Shape: []int64{h}},
			checkpoint.TensorSpec{Name: p + "self_attn.q_proj.weight", DType: checkpoint.BF16, Shape: []int64{h, h}},
			checkpoint.TensorSpec{Name: p + "self_attn.k_proj.weight", DType: checkpoint.BF16, Shape: []int64{kv, h}},
			checkpoint.TensorSpec{Name: p + "self_attn.v_proj.weight", DType: checkpoint.BF16, Shape: []int64{kv, h}},
			checkpoint.TensorSpec{Name: p + "self_attn.o_proj.weight", DType: checkpoint.BF16, Shape: []int64{h, h}},
			checkpoint.TensorSpec{Name: p + "post_attention_layernorm.weight", DType: checkpoint.BF16, Shape: []int64{h}},
			checkpoint.TensorSpec{Name: p + "mlp.gate_proj.weight", DType: checkpoint.BF16, Shape: []int64{inter, h}},
			checkpoint.TensorSpec{Name: p + "mlp.up_proj.weight", DType: checkpoint.BF16, Shape: []int64{inter, h}},
			checkpoint.TensorSpec{Name: p + "mlp.down_proj.weight", DType: checkpoint.BF16, Shape: []int64{h, inter}},
		)
	}
	return append(ts,
		checkpoint.TensorSpec{Name: "model.norm.weight", DType: checkpoint.BF16, Shape: []int64{h}},
		checkpoint.TensorSpec{Name: "lm_head.weight", DType: checkpoint.BF16, Shape: []int64{vocab, h}},
	)
}

// writeLlama writes the tiny Llama sharded into 3 files (ShardBytes 200 kB).
func writeLlama(t *testing.T) (string, *checkpoint.Manifest) {
	t.Helper()
	dir := t.TempDir()
	man, err := checkpoint.Write(dir, llamaTensors(), checkpoint.WriteOptions{Seed: 7, ShardBytes: 200_000})
	if err != nil {
		t.Fatal(err)
	}
	if len(man.Files) != 3 {
		t.Fatalf("wrote %d shards, want 3", len(man.Files))
	}
	return dir, man
}

// pooledBytes is the pooled layout's size: each tensor at a 256-byte
// boundary, the end rounded up.
func pooledBytes(specs []checkpoint.TensorSpec, order []device.WeightTensor) int64 {
	var end int64
	for _, t := range order {
		end = (end+255)&^255 + t.Bytes
	}
	return (end + 255) &^ 255
}

// readBack checksums every tensor of w as a forward step reads it from the
// device, and compares it with the manifest's.
func readBack(t *testing.T, m *gpuarena.Manager, w *device.Weights, man *checkpoint.Manifest) {
	t.Helper()
	sums := make(map[string]uint32)
	_, err := m.Forward(context.Background(), func(_ *device.Arena, dev device.Device) error {
		for _, wt := range w.Tensors {
			buf := make([]byte, wt.Bytes)
			if err := dev.CopyDtoH(buf, wt.Ptr); err != nil {
				return fmt.Errorf("%s: %w", wt.Name, err)
			}
			h := checkpoint.NewHash()
			h.Write(buf)
			sums[wt.Name] = h.Sum32()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != len(man.Checksums) {
		t.Fatalf("read %d tensors back, the manifest has %d", len(sums), len(man.Checksums))
	}
	for name, want := range man.Checksums {
		if sums[name] != want {
			t.Errorf("%s: CRC-32C on the device %08x, written %08x", name, sums[name], want)
		}
	}
}

func TestLoadWeightsPooled(t *testing.T) {
	ctx := context.Background()
	dir, man := writeLlama(t)
	m, sim := countingManager(t, 0)
	if _, err := m.BuildArena(ctx, testkit.SmallPlan("w")); err != nil {
		t.Fatal(err)
	}
	var calls int
	var last device.LoadProgress
	// 7 KiB chunks: tensors span chunks, and chunks hold several tensors.
	w, err := m.LoadWeights(ctx, dir, gpuarena.WithLoadChunkBytes(7<<10), gpuarena.WithLoadProgress(func(p device.LoadProgress) {
		if p.BytesDone <= last.BytesDone || p.BytesTotal != man.TotalBytes {
			t.Errorf("progress %+v after %+v", p, last)
		}
		calls++
		last = p
	}))
	if err != nil {
		t.Fatal(err)
	}
	if w.Layout != device.LayoutPooled || w.Bytes != man.TotalBytes || len(w.Tensors) != len(man.Checksums) {
		t.Fatalf("weights %s, %d B, %d tensors; want pooled, %d B, %d tensors", w.Layout, w.Bytes, len(w.Tensors), man.TotalBytes, len(man.Checksums))
	}
	if want := (man.TotalBytes + 7<<10 - 1) / (7 << 10); int64(calls) != want || last.BytesDone != man.TotalBytes || last.BytesPerSecond <= 0 {
		t.Fatalf("%d progress calls ending %+v, want %d ending at %d B", calls, last, want, man.TotalBytes)
	}
	if got := pooledBytes(nil, w.Tensors); w.PoolBytes != got || w.AllocatedBytes != got {
		t.Fatalf("pool %d B (allocated %d), want %d", w.PoolBytes, w.AllocatedBytes, got)
	}
	q, ok := w.Tensor("model.layers.1.self_attn.k_proj.weight")
	if !ok || q.DType != checkpoint.BF16 || fmt.Sprint(q.Shape) != "[24 72]" || q.Bytes != 24*72*2 || q.Ptr%arena.PoolAlign != 0 || q.Ptr < w.Pool {
		t.Fatalf("k_proj = %+v, %v; want BF16 [24 72], 3456 B, aligned, in the pool", q, ok)
	}
	l := mustLedger(t, m)
	if l.BytesByOwner()[device.WeightsOwner] != w.PoolBytes {
		t.Fatalf("the ledger holds %d B for weights, want the pool's %d", l.BytesByOwner()[device.WeightsOwner], w.PoolBytes)
	}
	views := 0
	for _, e := range l.Entries {
		if e.Parent == w.Pool {
			if wt, ok := w.Tensor(e.Label); !ok || wt.Ptr != e.Ptr || wt.Bytes != e.Bytes || e.Owner != device.WeightsOwner {
				t.Fatalf("ledger view %+v does not match the tensor %+v", e, wt)
			}
			views++
		}
	}
	if views != len(w.Tensors) {
		t.Fatalf("%d ledger views of the pool, want one per tensor (%d)", views, len(w.Tensors))
	}
	readBack(t, m, w, man)
	// A range that starts in one tensor may not run into the next.
	_, err = m.Forward(ctx, func(_ *device.Arena, dev device.Device) error {
		return dev.Memset(q.Ptr, 0, q.Bytes+1)
	})
	if !errors.Is(err, gpuarena.ErrOutOfRange) {
		t.Fatalf("memset one byte past a tensor: %v, want ErrOutOfRange", err)
	}
	r, err := m.Release(ctx)
	if err != nil || r.Bytes != testkit.SmallPlan("w").TotalBytes+w.PoolBytes {
		t.Fatalf("Release = %+v, %v; want the arena, its slab and the weights pool freed", r, err)
	}
	if sim.BytesInUse() != 0 {
		t.Fatalf("the backend holds %d B after Release", sim.BytesInUse())
	}
}

func TestLoadWeightsDiscrete(t *testing.T) {
	ctx := context.Background()
	dir, man := writeLlama(t)
	m, sim := countingManager(t, 0)
	if _, err := m.BuildArena(ctx, testkit.SmallPlan("w")); err != nil {
		t.Fatal(err)
	}
	before := sim.allocs.Load()
	w, err := m.LoadWeights(ctx, dir, gpuarena.WithWeightsLayout(device.LayoutDiscrete))
	if err != nil {
		t.Fatal(err)
	}
	if w.Pool != 0 || w.AllocatedBytes != man.TotalBytes || sim.allocs.Load()-before != int64(len(w.Tensors)) {
		t.Fatalf("discrete load: pool %#x, %d B allocated in %d calls; want no pool, %d B in %d", w.Pool, w.AllocatedBytes, sim.allocs.Load()-before, man.TotalBytes, len(w.Tensors))
	}
	for _, e := range mustLedger(t, m).Entries {
		if e.Owner == device.WeightsOwner {
			if wt, ok := w.Tensor(e.Label); !ok || wt.Ptr != e.Ptr || e.Parent != 0 {
				t.Fatalf("ledger entry %+v does not match its tensor", e)
			}
		}
	}
	readBack(t, m, w, man)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if sim.BytesInUse() != 0 {
		t.Fatalf("the backend holds %d B after Close", sim.BytesInUse())
	}
}

// A load cancelled from its progress callback frees what it allocated: the
// ledger and the backend are back where they were.
func TestLoadWeightsCancelled(t *testing.T) {
	for _, layout := range []device.Layout{device.LayoutPooled, device.LayoutDiscrete} {
		t.Run(string(layout), func(t *testing.T) {
			dir, _ := writeLlama(t)
			m, sim := countingManager(t, 0)
			if _, err := m.Alloc(context.Background(), "keep", 3*mib); err != nil {
				t.Fatal(err)
			}
			before := mustLedger(t, m)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			chunks := 0
			w, err := m.LoadWeights(ctx, dir, gpuarena.WithWeightsLayout(layout), gpuarena.WithLoadChunkBytes(4096),
				gpuarena.WithLoadProgress(func(device.LoadProgress) {
					if chunks++; chunks == 3 {
						cancel()
					}
				}))
			if w != nil || !errors.Is(err, context.Canceled) || chunks != 3 {
				t.Fatalf("LoadWeights = %v, %v after %d chunks; want context.Canceled after 3", w, err, chunks)
			}
			after := mustLedger(t, m)
			if after.Counters.CurrentBytes != before.Counters.CurrentBytes || len(after.Entries) != len(before.Entries) || sim.BytesInUse() != 3*mib {
				t.Fatalf("after the cancelled load: ledger %d B in %d entries, backend %d B; want %d B in %d, 3 MiB",
					after.Counters.CurrentBytes, len(after.Entries), sim.BytesInUse(), before.Counters.CurrentBytes, len(before.Entries))
			}
			// A context done before the load starts allocates nothing.
			if _, err := m.LoadWeights(ctx, dir); !errors.Is(err, context.Canceled) || sim.BytesInUse() != 3*mib {
				t.Fatalf("load with a done context: %v, backend %d B", err, sim.BytesInUse())
			}
		})
	}
}

// A checkpoint larger than the budget is refused before anything is
// allocated, with the shortfall.
func TestLoadWeightsOverBudget(t *testing.T) {
	ctx := context.Background()
	dir, man := writeLlama(t)
	// hostsim of 1 MiB at utilization 0.5: a budget of 512 KiB, 100 KiB held.
	m, sim := countingManager(t, mib, gpuarena.WithGPUMemoryUtilization(0.5))
	if _, err := m.Alloc(ctx, "held", 100<<10); err != nil {
		t.Fatal(err)
	}
	probe, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	tensors := probe.Tensors()
	probe.Close()
	wt := make([]device.WeightTensor, len(tensors))
	for i, t := range tensors {
		wt[i] = device.WeightTensor{Name: t.Name, Bytes: t.Bytes}
	}
	pool := pooledBytes(nil, wt)
	if pool <= 412<<10 {
		t.Fatalf("the test checkpoint (%d B, pooled %d B) fits the budget; make it larger", man.TotalBytes, pool)
	}
	_, err = m.LoadWeights(ctx, dir)
	var oom *gpuworker.OutOfMemoryError
	if !errors.As(err, &oom) || !oom.OverBudget || oom.Owner != device.WeightsOwner || oom.Bytes != pool || oom.ShortfallBytes != pool-(412<<10) {
		t.Fatalf("LoadWeights past the budget: %v; want an OverBudget *OutOfMemoryError for %d B short by %d B", err, pool, pool-(412<<10))
	}
	if n := sim.allocs.Load(); n != 1 || sim.BytesInUse() != 100<<10 {
		t.Fatalf("%d allocations reached the backend (%d B in use), want only the held one", n, sim.BytesInUse())
	}
}

// A bad checkpoint surfaces checkpoint's typed error, naming the file, with
// nothing allocated.
func TestLoadWeightsBadCheckpoint(t *testing.T) {
	ctx := context.Background()
	m, sim := countingManager(t, 0)
	dir, man := writeLlama(t)
	if err := os.Truncate(man.Files[1], 1000); err != nil {
		t.Fatal(err)
	}
	missing := t.TempDir()
	_, man2 := writeLlama(t)
	if err := os.Remove(man2.Files[2]); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		path string
		want error
	}{
		{"truncated shard", dir, checkpoint.ErrTruncated},
		{"missing shard", filepath.Dir(man2.Files[0]), checkpoint.ErrMissingShard},
		{"no checkpoint", filepath.Join(missing, "nothing"), checkpoint.ErrNoCheckpoint},
	}
	for _, c := range cases {
		w, err := m.LoadWeights(ctx, c.path)
		var ce *checkpoint.Error
		if w != nil || !errors.Is(err, c.want) || !errors.As(err, &ce) || ce.File == "" {
			t.Errorf("%s: LoadWeights = %v, %v; want a *checkpoint.Error naming the file, %v", c.name, w, err, c.want)
		}
	}
	for _, o := range []gpuarena.LoadOption{nil, gpuarena.WithWeightsLayout("striped"), gpuarena.WithLoadChunkBytes(-1), gpuarena.WithLoadChunkBytes(gpuworker.MaxLoadChunkBytes + 1)} {
		if _, err := m.LoadWeights(ctx, filepath.Dir(man2.Files[0]), o); !errors.Is(err, gpuarena.ErrInvalidValue) {
			t.Errorf("bad option: %v, want ErrInvalidValue", err)
		}
	}
	if n := sim.allocs.Load(); n != 0 || sim.BytesInUse() != 0 {
		t.Fatalf("bad checkpoints reached the backend: %d allocations", n)
	}
}

// A progress callback that panics leaves nothing allocated and no reader
// goroutine behind (goleak, TestMain).
func TestLoadWeightsProgressPanics(t *testing.T) {
	dir, _ := writeLlama(t)
	m, sim := countingManager(t, 0)
	func() {
		defer func() {
			if r := recover(); r != "progress bug" {
				t.Fatalf("recovered %v, want the callback's panic", r)
			}
		}()
		_, _ = m.LoadWeights(context.Background(), dir, gpuarena.WithLoadChunkBytes(4096),
			gpuarena.WithLoadProgress(func(device.LoadProgress) { panic("progress bug") }))
	}()
	if l := mustLedger(t, m); l.Counters.CurrentBytes != 0 || sim.BytesInUse() != 0 {
		t.Fatalf("after a panicking callback: ledger %d B, backend %d B; want 0", l.Counters.CurrentBytes, sim.BytesInUse())
	}
}
