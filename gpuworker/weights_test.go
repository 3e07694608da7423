package gpuworker_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// weightSpecs are three tensors of odd sizes, an empty one and a scalar.
var weightSpecs = []checkpoint.TensorSpec{
	{Name: "a.weight", DType: checkpoint.BF16, Shape: []int64{300, 7}},
	{Name: "empty.weight", DType: checkpoint.F32, Shape: []int64{0, 16}},
	{Name: "b.weight", DType: checkpoint.F32, Shape: []int64{1001}},
	{Name: "scale", DType: checkpoint.F32, Shape: []int64{}},
	{Name: "c.weight", DType: checkpoint.U8, Shape: []int64{5000}},
}

func openWeights(t *testing.T, opts checkpoint.WriteOptions) (*checkpoint.Checkpoint, *checkpoint.Manifest) {
	t.Helper()
	dir := t.TempDir()
	man, err := checkpoint.Write(dir, weightSpecs, opts)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	return ck, man
}

// Empty tensors get no memory and a NULL pointer; every other tensor reads
// back as written, in both layouts, and WeightsAllocatedBytes is what the
// load allocated.
func TestLoadWeightsLayouts(t *testing.T) {
	ctx := context.Background()
	ck, man := openWeights(t, checkpoint.WriteOptions{Seed: 1})
	for _, layout := range []device.Layout{device.LayoutPooled, device.LayoutDiscrete} {
		w, sim := startSim(t, gpuworker.HostSimConfig{})
		want, err := gpuworker.WeightsAllocatedBytes(ck, layout)
		if err != nil {
			t.Fatal(err)
		}
		wts, err := w.LoadWeights(ctx, ck, gpuworker.LoadOptions{Layout: layout, ChunkBytes: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if wts.AllocatedBytes != want || sim.BytesInUse() != want {
			t.Fatalf("%s: allocated %d B (backend %d), WeightsAllocatedBytes says %d", layout, wts.AllocatedBytes, sim.BytesInUse(), want)
		}
		if e, _ := wts.Tensor("empty.weight"); e.Ptr != 0 || e.Bytes != 0 || len(e.Shape) != 2 {
			t.Fatalf("%s: empty tensor %+v, want NULL and 0 B", layout, e)
		}
		for _, tt := range wts.Tensors {
			if tt.Bytes == 0 {
				continue
			}
			data, err := w.CopyDtoH(ctx, tt.Ptr, tt.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			h := checkpoint.NewHash()
			h.Write(data)
			if h.Sum32() != man.Checksums[tt.Name] {
				t.Fatalf("%s: %s reads back with CRC %08x, written %08x", layout, tt.Name, h.Sum32(), man.Checksums[tt.Name])
			}
		}
	}
}

// A file that shrinks after Open fails the load with checkpoint.ErrTruncated,
// and the load frees what it allocated.
func TestLoadWeightsFileShrank(t *testing.T) {
	ck, man := openWeights(t, checkpoint.WriteOptions{Seed: 2})
	w, sim := startSim(t, gpuworker.HostSimConfig{})
	if err := os.Truncate(man.Files[0], 2000); err != nil {
		t.Fatal(err)
	}
	_, err := w.LoadWeights(context.Background(), ck, gpuworker.LoadOptions{ChunkBytes: 512})
	if !errors.Is(err, checkpoint.ErrTruncated) {
		t.Fatalf("load of a shrunk file: %v, want ErrTruncated", err)
	}
	l, _ := w.Ledger(context.Background())
	if l.Counters.CurrentBytes != 0 || sim.BytesInUse() != 0 || l.Counters.Allocations != 1 || l.Counters.Frees != 1 {
		t.Fatalf("after the failed load: %+v, backend %d B; want the pool allocated once and freed", l.Counters, sim.BytesInUse())
	}
}

// A copy the device fails stops the load, which frees what it allocated.
func TestLoadWeightsCopyFails(t *testing.T) {
	ck, _ := openWeights(t, checkpoint.WriteOptions{Seed: 3})
	w, sim := startFaulty(t, gpuworker.HostSimConfig{}, gpuworker.Faults{FailCopyAt: 3})
	_, err := w.LoadWeights(context.Background(), ck, gpuworker.LoadOptions{Layout: device.LayoutDiscrete, ChunkBytes: 512})
	if !errors.Is(err, gpuworker.ErrInjected) || sim.BytesInUse() != 0 {
		t.Fatalf("load with a failing copy: %v, backend %d B; want ErrInjected and nothing held", err, sim.BytesInUse())
	}
}

// The device, not the budget, refusing the weights: ShortfallBytes is what
// the device lacked.
func TestLoadWeightsDeviceFull(t *testing.T) {
	ck, _ := openWeights(t, checkpoint.WriteOptions{Seed: 4})
	w, sim := startSim(t, gpuworker.HostSimConfig{TotalBytes: 4096}, gpuworker.WithoutBudget())
	_, err := w.LoadWeights(context.Background(), ck, gpuworker.LoadOptions{})
	need, _ := gpuworker.WeightsAllocatedBytes(ck, "")
	var oom *gpuworker.OutOfMemoryError
	if !errors.As(err, &oom) || oom.OverBudget || oom.Label != device.WeightsPoolLabel || oom.ShortfallBytes != need-4096 || sim.BytesInUse() != 0 {
		t.Fatalf("load on a 4 KiB device: %v; want the device's *OutOfMemoryError for %s short by %d B", err, device.WeightsPoolLabel, need-4096)
	}
	if _, err := w.LoadWeights(context.Background(), nil, gpuworker.LoadOptions{}); !errors.Is(err, gpuworker.ErrInvalidValue) {
		t.Fatalf("nil checkpoint: %v, want ErrInvalidValue", err)
	}
	if _, err := gpuworker.WeightsAllocatedBytes(ck, "striped"); !errors.Is(err, gpuworker.ErrInvalidValue) {
		t.Fatalf("bad layout: %v, want ErrInvalidValue", err)
	}
}
