package gpuworker_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/big"
	"slices"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// fuzzBytes hands out the fuzzer's bytes; past their end it gives zeros.
type fuzzBytes []byte

func (b *fuzzBytes) byte() byte {
	if len(*b) == 0 {
		return 0
	}
	c := (*b)[0]
	*b = (*b)[1:]
	return c
}

// int64 is a small signed value (an int16 in the next two bytes), or after
// a selector byte of 0xf0 or more an extreme one, so that sums and ends can
// pass 2^63.
func (b *fuzzBytes) int64() int64 {
	switch sel := b.byte(); {
	case sel < 0xf0:
		return int64(int16(binary.LittleEndian.Uint16([]byte{b.byte(), b.byte()})))
	case sel%4 == 0:
		return math.MaxInt64
	case sel%4 == 1:
		return math.MinInt64
	case sel%4 == 2:
		return math.MaxInt64 / 2
	default:
		return -1
	}
}

// fuzzValue encodes v as fuzzBytes.int64 reads it: an int16, or one of
// its extremes.
func fuzzValue(v int64) []byte {
	switch v {
	case math.MaxInt64:
		return []byte{0xf0}
	case math.MinInt64:
		return []byte{0xf1}
	case math.MaxInt64 / 2:
		return []byte{0xf2}
	}
	return []byte{0, byte(uint16(int16(v))), byte(uint16(int16(v)) >> 8)}
}

// seedTensor is one tensor of a seed input: the index of its name (0: one
// the checkpoint lacks, i: its i-th tensor), the mode (0: its own dtype and
// shape; 1: the same and the whole tensor as a first range; 3: dtype and
// dims from dtype and dims) and its ranges (offset, bytes). The
// checkpoint's tensors by name index: 1 a.weight (BF16 [300, 7], 4200 B),
// 2 b.weight (F32 [1001], 4004 B), 3 c.weight (U8 [5000]), 4 empty.weight,
// 5 scale.
type seedTensor struct {
	name, mode byte
	dtype      checkpoint.DType
	dims       []int64
	ranges     [][2]int64
}

// fuzzSeed encodes tensors as rangedInput decodes them.
func fuzzSeed(tensors ...seedTensor) []byte {
	out := []byte{byte(len(tensors))}
	for _, t := range tensors {
		out = append(out, t.name, t.mode)
		if t.mode%4 == 3 {
			out = append(out, byte(t.dtype), byte(len(t.dims)))
			for _, d := range t.dims {
				out = append(out, fuzzValue(d)...)
			}
		}
		out = append(out, byte(len(t.ranges)))
		for _, r := range t.ranges {
			out = append(append(out, fuzzValue(r[0])...), fuzzValue(r[1])...)
		}
	}
	return out
}

// rangedInput decodes up to 4 ranged tensors from data: a name of the
// checkpoint's in name order (or one it lacks), its dtype or another, its own shape or
// dims from the input, and up to 5 byte ranges from the input.
func rangedInput(ck *checkpoint.Checkpoint, data []byte) []gpuworker.RangedTensor {
	in := fuzzBytes(data)
	names := []string{"missing.weight"}
	for _, t := range ck.Tensors() {
		names = append(names, t.Name)
	}
	slices.Sort(names[1:])
	out := make([]gpuworker.RangedTensor, int(in.byte()%5))
	for i := range out {
		t := gpuworker.RangedTensor{Name: names[int(in.byte())%len(names)], DType: checkpoint.BF16}
		src, ok := ck.Tensor(t.Name)
		switch mode := in.byte(); {
		case ok && mode%4 != 3:
			t.DType, t.Shape = src.DType, slices.Clone(src.Shape)
			if mode%4 == 1 { // the whole tensor, as LoadWeights reads it
				t.Ranges = []arena.ByteRange{{Offset: 0, Bytes: src.Bytes}}
			}
		default:
			t.DType = checkpoint.DType(in.byte() % 20) // 0 and past the last: invalid
			t.Shape = make([]int64, int(in.byte()%3))
			for d := range t.Shape {
				t.Shape[d] = in.int64()
			}
		}
		for range int(in.byte() % 6) {
			t.Ranges = append(t.Ranges, arena.ByteRange{Offset: in.int64(), Bytes: in.int64()})
		}
		out[i] = t
	}
	return out
}

// wantValid is the model of LoadWeightRanges' input checks: every name in
// ck once, its dtype, a shape of whole bytes whose bits, counted dimension
// by dimension, stay below 2^63, and ranges inside
// the file's tensor, none empty, none overlapping another, together no more
// than the shape holds.
func wantValid(ck *checkpoint.Checkpoint, tensors []gpuworker.RangedTensor) bool {
	seen := map[string]bool{}
	for _, t := range tensors {
		src, ok := ck.Tensor(t.Name)
		if !ok || seen[t.Name] || src.DType != t.DType || !t.DType.Valid() {
			return false
		}
		seen[t.Name] = true
		bits := new(big.Int).SetInt64(t.DType.Bits())
		for _, d := range t.Shape {
			if d < 0 {
				return false
			}
			if bits.Mul(bits, big.NewInt(d)).Cmp(big.NewInt(math.MaxInt64)) > 0 {
				return false // the bits counted dimension by dimension pass 2^63−1
			}
		}
		if bits.Bit(0)|bits.Bit(1)|bits.Bit(2) != 0 {
			return false
		}
		bits.Rsh(bits, 3)
		sum := new(big.Int)
		rs := slices.Clone(t.Ranges)
		slices.SortFunc(rs, func(a, b arena.ByteRange) int { return cmp.Compare(a.Offset, b.Offset) })
		for i, r := range rs {
			if r.Offset < 0 || r.Bytes <= 0 || r.Offset > src.Bytes || r.Bytes > src.Bytes-r.Offset {
				return false
			}
			if i > 0 && rs[i-1].Offset+rs[i-1].Bytes > r.Offset {
				return false
			}
			sum.Add(sum, big.NewInt(r.Bytes))
		}
		if sum.Cmp(bits) > 0 {
			return false
		}
	}
	return true
}

// FuzzLoadWeightRanges: whatever the tensors and ranges asked — names
// missing or twice, another dtype, bad shapes, ranges negative, empty,
// overlapping, past the tensor or the file, or past 2^63 together —
// LoadWeightRanges never panics; it refuses bad input with ErrInvalidValue
// (good input too large for the device with ErrOutOfMemory) and leaves the
// ledger where it was, and loads good input byte for byte (each tensor's
// ranges back to back from its first byte).
func FuzzLoadWeightRanges(f *testing.F) {
	dir := f.TempDir()
	if _, err := checkpoint.Write(dir, weightSpecs, checkpoint.WriteOptions{Seed: 7}); err != nil {
		f.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { ck.Close() })
	sim, err := gpuworker.NewHostSim(gpuworker.HostSimConfig{TotalBytes: 64 * mib})
	if err != nil {
		f.Fatal(err)
	}
	w, err := gpuworker.Start(newSystem(f), func() (gpuworker.Backend, error) { return sim, nil }, gpuworker.WithLogger(quiet))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(w.Stop)

	for _, seed := range [][]byte{
		fuzzSeed(seedTensor{name: 1, mode: 1}), // a.weight whole
		fuzzSeed(seedTensor{name: 1, mode: 1}, seedTensor{name: 2, ranges: [][2]int64{{4, 8}, {0, 4}}}), // and two ranges of b.weight
		fuzzSeed(seedTensor{name: 4}, seedTensor{name: 5, mode: 1}),                                     // empty.weight and the scalar
		fuzzSeed(seedTensor{name: 1, mode: 1}, seedTensor{name: 1, mode: 1}),                            // a.weight named twice
		fuzzSeed(seedTensor{name: 2, ranges: [][2]int64{{0, 100}, {50, 100}}}),                          // overlapping ranges
		fuzzSeed(seedTensor{name: 2, ranges: [][2]int64{{16, 0}}}),                                      // an empty range
		fuzzSeed(seedTensor{name: 2, ranges: [][2]int64{{-1, 8}}}),                                      // a negative offset
		fuzzSeed(seedTensor{name: 2, ranges: [][2]int64{{8, -8}}}),                                      // a negative length
		fuzzSeed(seedTensor{name: 3, ranges: [][2]int64{{5000, 1}}}),                                    // past the tensor, the file's last
		fuzzSeed(seedTensor{name: 2, ranges: [][2]int64{{4000, 100}}}),                                  // past the tensor, into the next
		fuzzSeed(seedTensor{name: 3, ranges: [][2]int64{{1, math.MaxInt64}}}),                           // an end past 2^63
		fuzzSeed(seedTensor{name: 3, ranges: [][2]int64{{0, 4000}, {4000, 1000}, {4000, 1000}}}),        // a range twice: more than the shape holds
		fuzzSeed(seedTensor{name: 0, ranges: [][2]int64{{0, 4}}}),                                       // a tensor the checkpoint lacks
		fuzzSeed(seedTensor{name: 1, mode: 3, dtype: checkpoint.F32, dims: []int64{300, 7}}),            // another dtype
		fuzzSeed(seedTensor{name: 3, mode: 3, dtype: checkpoint.U8, dims: []int64{-1, 8}}),              // a negative dimension
		fuzzSeed(seedTensor{name: 3, mode: 3, dtype: checkpoint.U8, dims: []int64{math.MaxInt64, 2}}),   // a shape past 2^63 B
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		tensors := rangedInput(ck, data)
		before, err := w.Ledger(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wts, err := w.LoadWeightRanges(ctx, ck, tensors, gpuworker.LoadOptions{ChunkBytes: 512, Readers: 2})
		after, lerr := w.Ledger(ctx)
		if lerr != nil {
			t.Fatal(lerr)
		}
		valid := wantValid(ck, tensors)
		if err != nil {
			// Bad input is refused by the checks; good input only when the
			// device cannot hold it.
			if want := map[bool]error{false: gpuworker.ErrInvalidValue, true: gpuworker.ErrOutOfMemory}[valid]; !errors.Is(err, want) {
				t.Fatalf("LoadWeightRanges(%+v): %v; valid input %v, want %v", tensors, err, valid, want)
			}
			if after.Counters.CurrentBytes != before.Counters.CurrentBytes || len(after.Entries) != len(before.Entries) || sim.BytesInUse() != before.Counters.CurrentBytes {
				t.Fatalf("refused input moved the ledger: %d B in %d entries before, %d B in %d after (device %d B)",
					before.Counters.CurrentBytes, len(before.Entries), after.Counters.CurrentBytes, len(after.Entries), sim.BytesInUse())
			}
			return
		}
		if !valid {
			t.Fatalf("LoadWeightRanges(%+v) loaded input the checks should refuse", tensors)
		}
		defer func() {
			if _, _, err := w.FreeOwner(ctx, device.WeightsOwner); err != nil {
				t.Fatal(err)
			}
			if sim.BytesInUse() != before.Counters.CurrentBytes {
				t.Fatalf("device holds %d B after the weights were freed, %d before", sim.BytesInUse(), before.Counters.CurrentBytes)
			}
		}()
		if got := after.Counters.CurrentBytes - before.Counters.CurrentBytes; got != wts.AllocatedBytes {
			t.Fatalf("the ledger grew by %d B, the weights say %d B", got, wts.AllocatedBytes)
		}
		for i, dt := range wts.Tensors {
			var want []byte
			for _, r := range tensors[i].Ranges {
				sec, err := ck.Section(dt.Name)
				if err != nil {
					t.Fatal(err)
				}
				part := make([]byte, r.Bytes)
				if _, err := sec.ReadAt(part, r.Offset); err != nil {
					t.Fatal(err)
				}
				want = append(want, part...)
			}
			if len(want) == 0 {
				continue
			}
			got, err := w.CopyDtoH(ctx, dt.Ptr, int64(len(want)))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: the device holds other bytes than its ranges %v of the file", dt.Name, tensors[i].Ranges)
			}
		}
	})
}
