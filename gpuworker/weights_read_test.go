package gpuworker

import (
	"bytes"
	"os"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/device"
)

// A rank's column slice of a row-parallel weight (a quarter of each row)
// is read by gathered preads and staged exactly as one pread per row would:
// every chunk's bytes are the file's slices, and each chunk goes to the
// device as one copy per tensor it touches, not one per row (nor one for
// two tensors that are back to back on the device).
func TestChunkReaderGathers(t *testing.T) {
	dir := t.TempDir()
	const rows, cols = 3000, 1024 // BF16: 2,048 B a row
	specs := []checkpoint.TensorSpec{
		{Name: "a.weight", DType: checkpoint.BF16, Shape: []int64{rows, cols}},
		{Name: "b.weight", DType: checkpoint.BF16, Shape: []int64{rows, cols}},
	}
	if _, err := checkpoint.Write(dir, specs, checkpoint.WriteOptions{Seed: 4}); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	const rowBytes, slice = 2 * cols, 2 * cols / 4
	var ranges [][]arena.ByteRange
	for range specs {
		var rs []arena.ByteRange
		for r := range int64(rows) {
			rs = append(rs, arena.ByteRange{Offset: r*rowBytes + slice, Bytes: slice}) // the second quarter
		}
		ranges = append(ranges, rs)
	}
	w := &device.Weights{Tensors: []device.WeightTensor{{Name: "a.weight", Ptr: 0x10000}, {Name: "b.weight", Ptr: 0x10000 + rows*slice}}} // back to back, as a pool may put them
	const chunk = 1 << 20
	plan, total := chunks(ranges, chunk)
	if total != 2*rows*slice {
		t.Fatalf("total %d", total)
	}
	var want []byte
	for _, s := range specs {
		tn, _ := ck.Tensor(s.Name)
		raw, err := os.ReadFile(tn.File)
		if err != nil {
			t.Fatal(err)
		}
		for r := range int64(rows) {
			at := tn.Offset + r*rowBytes + slice
			want = append(want, raw[at:at+slice]...)
		}
	}
	r := &chunkReader{ck: ck, weights: w}
	var got []byte
	buf := make([]byte, chunk)
	for k, c := range plan {
		if err := r.read(c, buf); err != nil {
			t.Fatal(err)
		}
		segs, n := segments(c, w, buf)
		tensors := map[int]bool{}
		for _, p := range c {
			tensors[p.t] = true
		}
		if len(segs) != len(tensors) {
			t.Errorf("chunk %d: %d copies for %d tensors", k, len(segs), len(tensors))
		}
		before := len(got)
		for _, s := range segs {
			got = append(got, s.Src...)
		}
		if int64(len(got)) != min(int64(k+1)*chunk, total) || n != int64(len(got)-before) {
			t.Fatalf("chunk %d: %d B so far, %d B in its copies, segments says %d", k, len(got), len(got)-before, n)
		}
	}
	if r.scratch == nil || !bytes.Equal(got, want) {
		t.Errorf("gathered %v, the bytes equal the file's slices: %v", r.scratch != nil, bytes.Equal(got, want))
	}
}

// gatherEnd ends a run at another tensor, a piece out of file order, a gap
// past gatherGap, or a span past gatherSpan.
func TestGatherEnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    []piece
		want int
	}{
		{"one", []piece{{t: 0, src: 0, n: 10}}, 1},
		{"strided", []piece{{t: 0, src: 0, n: 10}, {t: 0, src: 30, n: 10}, {t: 0, src: 60, n: 10}}, 3},
		{"another tensor", []piece{{t: 0, src: 0, n: 10}, {t: 1, src: 30, n: 10}}, 1},
		{"backwards", []piece{{t: 0, src: 100, n: 10}, {t: 0, src: 0, n: 10}}, 1},
		{"overlap", []piece{{t: 0, src: 0, n: 10}, {t: 0, src: 5, n: 10}}, 1},
		{"gap", []piece{{t: 0, src: 0, n: 10}, {t: 0, src: 10 + gatherGap + 1, n: 10}}, 1},
		{"span", []piece{{t: 0, src: 0, n: 10}, {t: 0, src: gatherSpan - 5, n: 10}}, 1},
	} {
		if got := gatherEnd(tc.c, 0); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
