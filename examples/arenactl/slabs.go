package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
)

// carveSizes are the carves "arenactl run" makes from each slab, in bytes
// (odd sizes on purpose, to exercise the alignment); each is capped at an
// eighth of the slab.
var carveSizes = []int64{1 << 20, 4096 + 1, 64 << 10, 1}

// carveProbe is how many bytes of each carve are written and read back.
const carveProbe = 256

// carveJSON reports one carve.
type carveJSON struct {
	Slab   string `json:"slab"`
	Bytes  int64  `json:"bytes"`
	Offset int64  `json:"offset"`
}

// carveSlabs carves each of the plan's slabs a few times and checks that the
// carves are aligned, do not overlap, hold what is written to them, and that
// a carve past the slab's end is refused with arena.ErrSlabExhausted. A
// failed check is a *checkError.
func carveSlabs(ctx context.Context, m *gpuarena.Manager, plan *arena.Plan) ([]carveJSON, error) {
	var carves []carveJSON
	var ptrs []device.DevicePtr
	for _, s := range plan.Slabs {
		end := int64(0)
		for _, size := range carveSizes {
			size = max(min(size, s.Bytes/8), 1)
			ptr, off, err := m.CarveSlab(ctx, s.Name, size)
			if err != nil {
				return carves, fmt.Errorf("carve %d B from %s: %w", size, s.Name, err)
			}
			if off%256 != 0 || off < end {
				return carves, checkFailed("%s: carve of %d B at offset %d: want 256-aligned and ≥ %d", s.Name, size, off, end)
			}
			end = off + size
			carves = append(carves, carveJSON{Slab: s.Name, Bytes: size, Offset: off})
			ptrs = append(ptrs, ptr)
		}
		_, _, err := m.CarveSlab(ctx, s.Name, s.Bytes)
		if !errors.Is(err, arena.ErrSlabExhausted) {
			return carves, checkFailed("%s: a carve of the whole slab after %d carves gave %v, want %v", s.Name, len(carveSizes), err, arena.ErrSlabExhausted)
		}
	}
	if len(ptrs) == 0 {
		return carves, nil
	}
	_, err := m.Forward(ctx, func(_ *device.Arena, dev device.Device) error {
		for i, ptr := range ptrs {
			n := min(int64(carveProbe), carves[i].Bytes)
			want := make([]byte, n)
			for j := range want {
				want[j] = byte(i*31 + j)
			}
			if err := dev.CopyHtoD(ptr, want); err != nil {
				return fmt.Errorf("write carve %d of %s: %w", i, carves[i].Slab, err)
			}
			got := make([]byte, n)
			if err := dev.CopyDtoH(got, ptr); err != nil {
				return fmt.Errorf("read carve %d of %s: %w", i, carves[i].Slab, err)
			}
			if !bytes.Equal(got, want) {
				return checkFailed("carve %d of %s (offset %d): readback differs from what was written", i, carves[i].Slab, carves[i].Offset)
			}
		}
		return nil
	})
	return carves, err
}
