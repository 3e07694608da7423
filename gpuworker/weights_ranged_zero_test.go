package gpuworker_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// dirtyDevice is a simulated device whose fresh allocations hold 0xa5
// bytes, as cuMemAlloc hands back memory holding whatever was there: a
// byte the load does not write reads back as 0xa5, not as hostsim's zero.
type dirtyDevice struct {
	*gpuworker.HostSim
}

// Alloc allocates on the simulated device and fills the memory with 0xa5.
func (d dirtyDevice) Alloc(bytes int64) (device.DevicePtr, error) {
	p, err := d.HostSim.Alloc(bytes)
	if err != nil {
		return 0, err
	}
	return p, d.HostSim.Memset(p, 0xa5, bytes)
}

// A vocabulary shard's padding rows read back as zeros, in both layouts:
// rows [8, 10) of a 10-row embedding [10, 8] BF16 on a rank that holds 8
// rows (vocab 10 padded to 16, over 2 ranks) hold the file's two rows and
// then six zero rows, as vLLM's VocabParallelEmbedding.weight_loader
// leaves them; a tensor whose ranges fill it has no zero-fill, and one
// slice of a tensor (a.weight's middle) keeps its bytes.
func TestLoadWeightRangesZeroesPadding(t *testing.T) {
	dir := t.TempDir()
	specs := []checkpoint.TensorSpec{
		{Name: "a.weight", DType: checkpoint.BF16, Shape: []int64{6, 8}},
		{Name: "embed.weight", DType: checkpoint.BF16, Shape: []int64{10, 8}},
	}
	if _, err := checkpoint.Write(dir, specs, checkpoint.WriteOptions{Seed: 5}); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	const row = 8 * 2 // bytes of one row
	tensors := []gpuworker.RangedTensor{
		{Name: "a.weight", DType: checkpoint.BF16, Shape: []int64{2, 8}, Ranges: []arena.ByteRange{{Offset: 2 * row, Bytes: 2 * row}}},
		{Name: "embed.weight", DType: checkpoint.BF16, Shape: []int64{8, 8}, Ranges: []arena.ByteRange{{Offset: 8 * row, Bytes: 2 * row}}},
	}
	for _, layout := range []device.Layout{device.LayoutPooled, device.LayoutDiscrete} {
		t.Run(string(layout), func(t *testing.T) {
			sim, err := gpuworker.NewHostSim(gpuworker.HostSimConfig{})
			if err != nil {
				t.Fatal(err)
			}
			w := startWith(t, func() (gpuworker.Backend, error) { return dirtyDevice{sim}, nil })
			ctx := context.Background()
			wts, err := w.LoadWeightRanges(ctx, ck, tensors, gpuworker.LoadOptions{Layout: layout, ChunkBytes: 24})
			if err != nil {
				t.Fatal(err)
			}
			for i, dt := range wts.Tensors {
				sec, err := ck.Section(dt.Name)
				if err != nil {
					t.Fatal(err)
				}
				r := tensors[i].Ranges[0]
				want := make([]byte, dt.Bytes) // the file's bytes, then zeros
				if _, err := sec.ReadAt(want[:r.Bytes], r.Offset); err != nil {
					t.Fatal(err)
				}
				got, err := w.CopyDtoH(ctx, dt.Ptr, dt.Bytes)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s: the device holds\n%x\nwant the file's %d B and then zeros\n%x", dt.Name, got, r.Bytes, want)
				}
			}
			if len(wts.Tensors) != 2 || wts.Tensors[1].Bytes != 8*row {
				t.Errorf("tensors %+v, want embed.weight of %d B", wts.Tensors, 8*row)
			}
		})
	}
}
