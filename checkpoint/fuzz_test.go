package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// openSentinels are the kinds of error Open may return for a file's bytes.
var openSentinels = []error{ErrTruncated, ErrHeaderTooLarge, ErrBadHeader, ErrUnknownDType, ErrShapeMismatch,
	ErrOverlap, ErrHole, ErrDuplicateTensor}

// fuzzSeeds are files for the paths the generator's files do not take.
var fuzzSeeds = []string{
	goodHeader,
	`{}`,
	`{"__metadata__":null}   `,
	`{"e":{"dtype":"F32","shape":[0,5],"data_offsets":[0,0]},"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]}}`,
	`{"a":{"dtype":"F4","shape":[2,3],"data_offsets":[0,3]},"b":{"dtype":"F6_E3M2","shape":[4],"data_offsets":[3,6]}}`,
	`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`,
	`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":[{"y":null}]},"a":{}}`,
	`{"w":{"dtype":"F32","shape":[4611686018427387904,8],"data_offsets":[0,8]}}`,
	`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,18446744073709551615]}}`,
}

// FuzzOpenHeader writes arbitrary bytes as a safetensors file and opens
// it: Open never panics, and either returns a typed *Error naming the file,
// with a bounded message, or a checkpoint whose invariants hold (tensors
// tile the data area in offset order, each one's bytes are its shape ×
// dtype size, names are unique, every section reads whole).
func FuzzOpenHeader(f *testing.F) {
	for _, h := range fuzzSeeds {
		f.Add(rawFile(h, 16))
	}
	dir := f.TempDir()
	if _, err := Write(dir, []TensorSpec{
		{"model.norm.weight", BF16, []int64{4}}, {"scale", F8E8M0, []int64{2}}, {"q", F8E4M3, []int64{2, 2}}, {"s", F32, nil},
	}, WriteOptions{Seed: 1}); err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(filepath.Join(dir, SingleFileName))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add(withLength(good, 1<<63))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "model.safetensors")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Open(p)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.File != p {
				t.Fatalf("error %T %v is not an *Error naming %s", err, err, p)
			}
			known := false
			for _, s := range openSentinels {
				known = known || (e.Err == s && errors.Is(err, s))
			}
			if !known {
				t.Fatalf("error of unexpected kind %v: %v", e.Err, err)
			}
			if n := len(err.Error()) - len(p); n > 6*maxEchoBytes {
				t.Fatalf("message of %d bytes: %.400s…", n, err)
			}
			return
		}
		defer c.Close()
		checkInvariants(t, c, int64(len(data)))
	})
}

// checkInvariants checks an opened single-file checkpoint of size bytes.
func checkInvariants(t *testing.T, c *Checkpoint, size int64) {
	t.Helper()
	shards := c.Shards()
	if len(shards) != 1 || shards[0].Size != size || shards[0].Tensors != c.Len() {
		t.Fatalf("shards %+v for one file of %d bytes with %d tensors", shards, size, c.Len())
	}
	at := shards[0].DataOffset
	var sum int64
	seen := map[string]bool{}
	for _, tn := range c.Tensors() {
		if tn.Offset != at || tn.Bytes < 0 || !tn.DType.Valid() {
			t.Fatalf("tensor %+v: want a valid dtype at offset %d", tn, at)
		}
		if seen[tn.Name] {
			t.Fatalf("tensor %q twice", tn.Name)
		}
		seen[tn.Name] = true
		if got := tn.Elements() * tn.DType.Bits(); tn.Elements() < 1<<40 && got != 8*tn.Bytes {
			t.Fatalf("tensor %+v: %d elements of %d bits is not %d bytes", tn, tn.Elements(), tn.DType.Bits(), tn.Bytes)
		}
		r, err := c.Section(tn.Name)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, tn.Bytes)
		if n, err := r.ReadAt(buf, 0); int64(n) != tn.Bytes || (err != nil && tn.Bytes > 0) {
			t.Fatalf("tensor %q: read %d of %d bytes: %v", tn.Name, n, tn.Bytes, err)
		}
		at += tn.Bytes
		sum += tn.Bytes
	}
	if at != size || sum != c.TotalBytes() {
		t.Fatalf("tensors end at %d of a %d-byte file, sum %d, TotalBytes %d", at, size, sum, c.TotalBytes())
	}
}

// FuzzParseIndex parses arbitrary bytes as a model.safetensors.index.json:
// never a panic; an *Error of an index kind, or an index whose shards are
// the sorted distinct local names its weight_map maps to.
func FuzzParseIndex(f *testing.F) {
	for _, s := range []string{
		`{"metadata":{"total_size":8},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`,
		`{"weight_map":{"a":"./x.safetensors","b":"x.safetensors","c":"sub/y.safetensors"},"metadata":null,"extra":[1,{"k":"v"}]}`,
		`{"weight_map":{"a":"../x"}}`,
		`{"weight_map":{"a\u0000":"x\u002esafetensors"},"metadata":{"total_size":1.6e10}}`,
		`{"weight_map":{}}`,
		`[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ix, err := parseIndex("index.json", data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || (e.Err != ErrBadIndex && e.Err != ErrDuplicateTensor) {
				t.Fatalf("error %T %v: want an *Error of ErrBadIndex or ErrDuplicateTensor", err, err)
			}
			return
		}
		if len(ix.weightMap) == 0 || len(ix.shards) == 0 || !slices.IsSorted(ix.shards) || ix.totalSize < 0 {
			t.Fatalf("index %+v", ix)
		}
		for name, shard := range ix.weightMap {
			if _, ok := slices.BinarySearch(ix.shards, shard); !ok || !localName(shard) {
				t.Fatalf("%q maps to %q, not a local shard of %q", name, shard, ix.shards)
			}
		}
	})
}
