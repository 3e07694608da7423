package tests

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/internal/modelgen"
)

// A generated Llama-shaped checkpoint loads through the Manager in chunks
// smaller than its tensors, read by several readers (on the cuda backend
// through page-locked buffers and asynchronous copies), and every tensor
// reads back with the CRC-32C it was written with; a load cancelled half
// way leaves the device as it was; Close leaves nothing. With -tags cuda it
// runs on CUDA device 0.
func TestWeightsLoadReadsBack(t *testing.T) {
	dev := testBackend(t)
	model := modelgen.ForTest(t, "../internal/modelgen/testdata/tiny-llama.json", modelgen.Options{Seed: 7})
	m, err := gpuarena.New(quiet, gpuarena.WithBackendFactory(dev.factory))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	w, err := m.LoadWeights(ctx, model.Dir, gpuarena.WithLoadChunkBytes(64<<10), gpuarena.WithLoadReaders(3))
	if err != nil {
		t.Fatal(err)
	}
	if w.Bytes != model.Manifest.TotalBytes {
		t.Fatalf("loaded %d B, the checkpoint holds %d B", w.Bytes, model.Manifest.TotalBytes)
	}
	if _, err := m.BuildArena(ctx, smallPlan()); err != nil {
		t.Fatal(err)
	}
	checked := 0
	if _, err := m.Forward(ctx, func(_ *device.Arena, d device.Device) error {
		for _, tt := range w.Tensors {
			if tt.Bytes == 0 {
				continue
			}
			checked++
			data := make([]byte, tt.Bytes)
			if err := d.CopyDtoH(data, tt.Ptr); err != nil {
				return err
			}
			h := checkpoint.NewHash()
			h.Write(data)
			if h.Sum32() != model.Manifest.Checksums[tt.Name] {
				t.Errorf("%s reads back with CRC %08x, written %08x", tt.Name, h.Sum32(), model.Manifest.Checksums[tt.Name])
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if checked != len(model.Manifest.Checksums) {
		t.Fatalf("checked %d tensors, the checkpoint has %d", checked, len(model.Manifest.Checksums))
	}
	if _, err := m.Release(ctx); err != nil {
		t.Fatal(err)
	}

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, err = m.LoadWeights(cctx, model.Dir, gpuarena.WithLoadChunkBytes(64<<10), gpuarena.WithLoadProgress(func(p device.LoadProgress) {
		if p.BytesDone*2 >= p.BytesTotal {
			cancel()
		}
	}))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("load cancelled half way: %v, want context.Canceled", err)
	}
	l, err := m.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l.Counters.CurrentBytes != 0 {
		t.Fatalf("the ledger holds %d B after the cancelled load, want 0", l.Counters.CurrentBytes)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if n, ok := dev.clean(); !ok {
		t.Fatalf("the %s device holds %d B after Close", dev.name, n)
	}
}
