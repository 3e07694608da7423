package gpuarena_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// BenchmarkLoadWeights measures LoadWeights on hostsim against its limits,
// in bytes/s (MB/s as go test prints it), on one checkpoint of 256 MiB in
// two shards, read from the page cache:
//
//   - pread: reading every tensor with checkpoint.Section in 16 MiB
//     chunks and nothing else (the input's limit);
//
//   - copy: a plain copy of 256 MiB of host memory into a fresh simulated
//     allocation, 16 MiB at a time (the "link's" limit on hostsim: memory
//     bandwidth plus the first touch of the lazily mapped pages);
//
//   - load: Manager.LoadWeights then Release, pooled, default chunks.
//
//     go test . -run '^$' -bench LoadWeights -benchtime 10x
func BenchmarkLoadWeights(b *testing.B) {
	const tensorBytes = 64 << 20
	dir := b.TempDir()
	var specs []checkpoint.TensorSpec
	for i := range 4 {
		specs = append(specs, checkpoint.TensorSpec{Name: fmt.Sprintf("model.layers.%d.mlp.down_proj.weight", i), DType: checkpoint.BF16, Shape: []int64{tensorBytes / 2 / 4096, 4096}})
	}
	man, err := checkpoint.Write(dir, specs, checkpoint.WriteOptions{ShardBytes: 2 * tensorBytes})
	if err != nil {
		b.Fatal(err)
	}
	total := man.TotalBytes
	ck, err := checkpoint.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer ck.Close()
	chunk := make([]byte, gpuworker.DefaultLoadChunkBytes)

	b.Run("pread", func(b *testing.B) {
		b.SetBytes(total)
		for b.Loop() {
			for _, t := range ck.Tensors() {
				r, err := ck.Section(t.Name)
				if err != nil {
					b.Fatal(err)
				}
				for off := int64(0); off < t.Bytes; off += int64(len(chunk)) {
					n := min(int64(len(chunk)), t.Bytes-off)
					if _, err := r.ReadAt(chunk[:n], off); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	})
	b.Run("copy", func(b *testing.B) {
		sim, err := gpuworker.NewHostSim(gpuworker.HostSimConfig{})
		if err != nil {
			b.Fatal(err)
		}
		defer sim.Close()
		src := make([]byte, total)
		for i := range src {
			src[i] = byte(i)
		}
		b.SetBytes(total)
		for b.Loop() {
			p, err := sim.Alloc(total)
			if err != nil {
				b.Fatal(err)
			}
			for off := int64(0); off < total; off += int64(len(chunk)) {
				n := min(int64(len(chunk)), total-off)
				if err := sim.CopyHtoD(p+device.DevicePtr(off), src[off:off+n]); err != nil {
					b.Fatal(err)
				}
			}
			if err := sim.Free(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("load", func(b *testing.B) {
		m, err := gpuarena.New(benchQuiet)
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		ctx := context.Background()
		b.SetBytes(total)
		for b.Loop() {
			if _, err := m.LoadWeights(ctx, dir); err != nil {
				b.Fatal(err)
			}
			if _, err := m.Release(ctx); err != nil && !errors.Is(err, gpuarena.ErrNoArena) {
				b.Fatal(err)
			}
		}
	})
}
