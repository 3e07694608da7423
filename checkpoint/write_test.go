package checkpoint

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestWriteHeaderBytes: a file's first bytes are the reference writer's:
// the length, compact JSON with __metadata__ first and tensors by dtype
// (widest first) then name, space-padded to a multiple of 8.
func TestWriteHeaderBytes(t *testing.T) {
	dir := t.TempDir()
	_, err := Write(dir, []TensorSpec{
		{"w", BF16, []int64{2}},
		{"a\"b", U8, []int64{3}},
		{"scale", F32, []int64{}},
		{"b", BF16, []int64{1, 1}},
	}, WriteOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, SingleFileName))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"__metadata__":{"format":"pt"},` +
		`"scale":{"dtype":"F32","shape":[],"data_offsets":[0,4]},` +
		`"b":{"dtype":"BF16","shape":[1,1],"data_offsets":[4,6]},` +
		`"w":{"dtype":"BF16","shape":[2],"data_offsets":[6,10]},` +
		`"a\"b":{"dtype":"U8","shape":[3],"data_offsets":[10,13]}}`
	want += strings.Repeat(" ", (8-len(want)%8)%8)
	n := binary.LittleEndian.Uint64(data)
	if n != uint64(len(want)) || string(data[8:8+n]) != want {
		t.Fatalf("header %d bytes %q\nwant %d bytes %q", n, data[8:min(8+n, uint64(len(data)))], len(want), want)
	}
	if len(data) != 8+len(want)+13 {
		t.Errorf("file of %d bytes, want %d", len(data), 8+len(want)+13)
	}
}

// TestWriteValues: every dtype's generated values are what the filler
// promises: finite floats of weight size, booleans 0 or 1, and the same
// bytes for the same seed, different ones for another.
func TestWriteValues(t *testing.T) {
	var specs []TensorSpec
	for d := Bool; d <= U64; d++ {
		specs = append(specs, TensorSpec{"t." + d.String(), d, []int64{4096}})
	}
	dir := t.TempDir()
	m, err := Write(dir, specs, WriteOptions{Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	read := func(d DType) []byte {
		r, err := c.Section("t." + d.String())
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, r.Size())
		if _, err := r.ReadAt(b, 0); err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Magnitude ranges, from the masks in write_fill.go.
	checkRange := func(d DType, vals []float64, lo, hi float64) {
		t.Helper()
		seenNeg, seenPos := false, false
		for i, v := range vals {
			if a := math.Abs(v); math.IsNaN(v) || !(a >= lo && a < hi) {
				t.Fatalf("%s[%d] = %g, outside ±[%g, %g)", d, i, v, lo, hi)
			}
			seenNeg, seenPos = seenNeg || v < 0, seenPos || v > 0
		}
		if !seenNeg || !seenPos {
			t.Errorf("%s: signs not both drawn", d)
		}
	}
	const lo, hi = 1.0 / 128, 1.0 / 8
	checkRange(BF16, decode(read(BF16), 2, func(u uint64) float64 { return float64(math.Float32frombits(uint32(u) << 16)) }), lo, hi)
	checkRange(F16, decode(read(F16), 2, func(u uint64) float64 { return minifloat(u, 5, 10, 15) }), lo, hi)
	checkRange(F32, decode(read(F32), 4, func(u uint64) float64 { return float64(math.Float32frombits(uint32(u))) }), lo, hi)
	checkRange(C64, decode(read(C64), 4, func(u uint64) float64 { return float64(math.Float32frombits(uint32(u))) }), lo, hi)
	checkRange(F64, decode(read(F64), 8, math.Float64frombits), lo, hi)
	checkRange(F8E5M2, decode(read(F8E5M2), 1, func(u uint64) float64 { return minifloat(u, 5, 2, 15) }), lo, hi)
	checkRange(F8E5M2FNUZ, decode(read(F8E5M2FNUZ), 1, func(u uint64) float64 { return minifloat(u, 5, 2, 16) }), lo/2, hi/2)
	checkRange(F8E4M3, decode(read(F8E4M3), 1, func(u uint64) float64 { return minifloat(u, 4, 3, 7) }), 0.125, 2)
	checkRange(F8E4M3FNUZ, decode(read(F8E4M3FNUZ), 1, func(u uint64) float64 { return minifloat(u, 4, 3, 8) }), 0.0625, 1)
	for i, b := range read(F8E8M0) {
		if b < 120 || b > 123 {
			t.Fatalf("F8_E8M0[%d] = %d, outside 120..123 (2^-7..2^-4)", i, b)
		}
	}
	ones := 0
	for i, b := range read(Bool) {
		if b > 1 {
			t.Fatalf("BOOL[%d] = %d", i, b)
		}
		ones += int(b)
	}
	if ones < 1800 || ones > 2300 {
		t.Errorf("%d of 4096 BOOLs are 1, want about half", ones)
	}
	// Integers are raw bits: all 256 byte values show up.
	seen := map[byte]bool{}
	for _, b := range read(I32) {
		seen[b] = true
	}
	if len(seen) != 256 {
		t.Errorf("I32 bytes take %d distinct values, want 256", len(seen))
	}

	again, err := Write(t.TempDir(), specs, WriteOptions{Seed: 11, ShardBytes: 9000})
	if err != nil {
		t.Fatal(err)
	}
	other, err := Write(t.TempDir(), specs, WriteOptions{Seed: 12})
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Files) < 2 {
		t.Fatalf("ShardBytes 9000 wrote %d files, want several", len(again.Files))
	}
	for _, s := range specs {
		if again.Checksums[s.Name] != m.Checksums[s.Name] {
			t.Errorf("%s: seed 11 gave %#x, then %#x", s.Name, m.Checksums[s.Name], again.Checksums[s.Name])
		}
		if other.Checksums[s.Name] == m.Checksums[s.Name] {
			t.Errorf("%s: seeds 11 and 12 gave the same bytes", s.Name)
		}
	}
}

// decode reads little-endian elements of size bytes and converts each.
func decode(b []byte, size int, conv func(uint64) float64) []float64 {
	out := make([]float64, 0, len(b)/size)
	for i := 0; i+size <= len(b); i += size {
		var u uint64
		for k := size - 1; k >= 0; k-- {
			u = u<<8 | uint64(b[i+k])
		}
		out = append(out, conv(u))
	}
	return out
}

// minifloat decodes a sign | exponent (ebits) | mantissa (mbits) float of
// the given bias, Inf and NaN ignored (the generator must not draw them, and
// checkRange refuses the out-of-range values their codes decode to).
func minifloat(u uint64, ebits, mbits uint, bias int) float64 {
	sign := 1.0
	if u>>(ebits+mbits)&1 == 1 {
		sign = -1
	}
	e := int(u >> mbits & (1<<ebits - 1))
	m := float64(u&(1<<mbits-1)) / float64(uint64(1)<<mbits)
	if e == 0 {
		return sign * math.Ldexp(m, 1-bias)
	}
	return sign * math.Ldexp(1+m, e-bias)
}

// TestWriteRefuses: bad specs and a folder already holding a checkpoint are
// typed errors, and nothing is left in the folder.
func TestWriteRefuses(t *testing.T) {
	cases := []struct {
		name     string
		specs    []TensorSpec
		opts     WriteOptions
		sentinel error
		tensor   string
	}{
		{"empty name", []TensorSpec{{"", BF16, []int64{1}}}, WriteOptions{}, ErrBadSpec, ""},
		{"reserved name", []TensorSpec{{"__metadata__", BF16, []int64{1}}}, WriteOptions{}, ErrBadSpec, "__metadata__"},
		{"name not UTF-8", []TensorSpec{{"a\xff", BF16, []int64{1}}}, WriteOptions{}, ErrBadSpec, "a\xff"},
		{"duplicate name", []TensorSpec{{"a", BF16, []int64{1}}, {"a", F32, []int64{1}}}, WriteOptions{}, ErrDuplicateTensor, "a"},
		{"invalid dtype", []TensorSpec{{"a", DType(99), []int64{1}}}, WriteOptions{}, ErrUnknownDType, "a"},
		{"negative dimension", []TensorSpec{{"a", BF16, []int64{2, -1}}}, WriteOptions{}, ErrBadSpec, "a"},
		{"packed bits not whole bytes", []TensorSpec{{"a", F6E2M3, []int64{3}}}, WriteOptions{}, ErrShapeMismatch, "a"},
		{"overflow", []TensorSpec{{"a", F32, []int64{1 << 62, 4}}}, WriteOptions{}, ErrShapeMismatch, "a"},
		{"total past 2^63-1", []TensorSpec{{"a", U8, []int64{1<<61 - 8}}, {"b", U8, []int64{1<<61 - 8}}, {"c", U8, []int64{1<<61 - 8}},
			{"d", U8, []int64{1<<61 - 8}}, {"e", U8, []int64{1<<61 - 8}}}, WriteOptions{}, ErrBadSpec, "e"},
		{"negative ShardBytes", nil, WriteOptions{ShardBytes: -1}, ErrBadSpec, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			_, err := Write(dir, tc.specs, tc.opts)
			wantError(t, err, tc.sentinel, dir, tc.tensor)
			if _, err := os.Stat(dir); err == nil {
				t.Errorf("Write created %s before refusing", dir)
			}
		})
	}
	t.Run("folder holds a checkpoint", func(t *testing.T) {
		dir := t.TempDir()
		if _, err := Write(dir, llamaSpecs(1), WriteOptions{ShardBytes: 50_000}); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dir, IndexFileName)); err != nil {
			t.Fatal(err)
		}
		before, _ := os.ReadDir(dir)
		_, err := Write(dir, llamaSpecs(1), WriteOptions{})
		wantError(t, err, ErrExists, filepath.Join(dir, "model-00001-of-00003.safetensors"), "")
		after, _ := os.ReadDir(dir)
		if len(after) != len(before) {
			t.Errorf("%d entries before, %d after", len(before), len(after))
		}
	})
}

// TestPlanShards: the split follows huggingface_hub's, including its
// documented example: sizes [6, 6, 2, 6, 2, 2] under 10 give [6], [6, 2],
// [6, 2, 2]; a tensor past the limit gets a shard of its own, appended as
// soon as it is met.
func TestPlanShards(t *testing.T) {
	plan := func(sizes []int64, limit int64) [][]string {
		specs := make([]TensorSpec, len(sizes))
		for i := range sizes {
			specs[i] = TensorSpec{Name: string(rune('a' + i)), DType: U8}
		}
		var out [][]string
		for _, s := range planShards(specs, sizes, limit) {
			var names []string
			for _, t := range s.tensors {
				names = append(names, t.spec.Name)
			}
			out = append(out, names)
		}
		return out
	}
	for _, tc := range []struct {
		sizes []int64
		limit int64
		want  [][]string
	}{
		{[]int64{6, 6, 2, 6, 2, 2}, 10, [][]string{{"a"}, {"b", "c"}, {"d", "e", "f"}}},
		{[]int64{3, 20, 3, 3}, 10, [][]string{{"b"}, {"a", "c", "d"}}},
		{[]int64{4, 4}, 8, [][]string{{"a", "b"}}},
		{nil, 8, [][]string{nil}},
	} {
		if got := plan(tc.sizes, tc.limit); !slices.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("sizes %v under %d: %v, want %v", tc.sizes, tc.limit, got, tc.want)
		}
	}
}

// TestDType: every dtype round-trips through its spelling, with the
// reference's bit widths.
func TestDType(t *testing.T) {
	bits := map[string]int64{"BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8,
		"F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32,
		"F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64}
	n := 0
	for d := DType(0); d < 255; d++ {
		if !d.Valid() {
			if d.Bits() != 0 || !strings.HasPrefix(d.String(), "DType(") {
				t.Errorf("invalid %d: bits %d, %q", d, d.Bits(), d.String())
			}
			continue
		}
		n++
		if p, ok := ParseDType(d.String()); !ok || p != d || d.Bits() != bits[d.String()] {
			t.Errorf("%s: parses to %v %v, %d bits; want itself, %d", d, p, ok, d.Bits(), bits[d.String()])
		}
	}
	if n != len(bits) {
		t.Errorf("%d valid dtypes, want %d", n, len(bits))
	}
}
