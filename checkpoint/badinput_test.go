package checkpoint

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goodHeader is a valid two-tensor header: a is F32 [2] at [0, 8), b is
// BF16 [2, 2] at [8, 16).
const goodHeader = `{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"BF16","shape":[2,2],"data_offsets":[8,16]}}`

// TestBadFile: each bad input of one file is an *Error of its kind naming
// the file and the tensor, leaves no descriptor open, and never panics.
func TestBadFile(t *testing.T) {
	good := rawFile(goodHeader, 16)
	cases := []struct {
		name     string
		data     []byte
		sentinel error
		tensor   string
		reason   string // a fragment the message must hold
	}{
		{"truncated file", good[:len(good)-4], ErrTruncated, "b", "end past the data area, which holds 12 bytes"},
		{"shorter than the header length", good[:5], ErrTruncated, "", "the file is 5 bytes"},
		{"header length past the end of the file", withLength(good, 1000), ErrTruncated, "", "the header length says 1000 bytes"},
		{"header length past the format's cap", withLength(good, MaxHeaderBytes+1), ErrHeaderTooLarge, "", "100000001"},
		{"header length 2^64-1", withLength(good, 1<<64-1), ErrHeaderTooLarge, "", "18446744073709551615"},
		{"header not JSON", rawFile(`{"a":{"dtype":"F32",`, 0), ErrBadHeader, "", `not valid JSON: it breaks at header byte 20 (the text up to there ends "{\"a\":{\"dtype\":\"F32\",")`},
		{"header not UTF-8", rawFile("{\"\xff\":{}}", 0), ErrBadHeader, "", "not UTF-8"},
		{"header not an object", rawFile(`[1,2]`, 0), ErrBadHeader, "", "does not begin with '{'"},
		{"header with leading space", rawFile(` {}`, 0), ErrBadHeader, "", "does not begin with '{'"},
		{"empty header", rawFile(``, 0), ErrBadHeader, "", "does not begin with '{'"},
		{"bytes after the JSON object", rawFile(`{} x`, 0), ErrBadHeader, "", "invalid character 'x' after top-level value"},
		{"unknown dtype", rawFile(`{"w":{"dtype":"Q4_K","shape":[2],"data_offsets":[0,2]}}`, 2), ErrUnknownDType, "w", `dtype "Q4_K"`},
		{"lower-case dtype", rawFile(`{"w":{"dtype":"bf16","shape":[1],"data_offsets":[0,2]}}`, 2), ErrUnknownDType, "w", `dtype "bf16"`},
		{"byte range disagrees with shape", rawFile(`{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, 8), ErrShapeMismatch, "w",
			"shape [3] of F32 is 12 bytes but data_offsets [0, 8] hold 8"},
		{"shape overflows", rawFile(`{"w":{"dtype":"F32","shape":[4611686018427387904,8],"data_offsets":[0,8]}}`, 8), ErrShapeMismatch, "w", "more than 2^64 elements"},
		{"packed dtype not whole bytes", rawFile(`{"w":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}`, 2), ErrShapeMismatch, "w", "12 bits, not whole bytes"},
		{"overlapping tensors", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 12),
			ErrOverlap, "b", `overlap those of "a", which end at 8`},
		{"a hole between tensors", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}}`, 20),
			ErrHole, "b", `bytes [8, 12) between "a" and this tensor`},
		{"a hole before the first tensor", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 12), ErrHole, "a", "the start of the data area"},
		{"bytes after the last tensor", rawFile(goodHeader, 20), ErrHole, "b", "bytes [16, 20) of the data area after the last tensor"},
		{"data but no tensors", rawFile(`{}`, 3), ErrHole, "", "in a file with no tensors"},
		{"tensor twice in one header", rawFile(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, 2),
			ErrDuplicateTensor, "a", "lists this tensor twice"},
		{"field twice in an entry", rawFile(`{"a":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}}`, 1), ErrBadHeader, "a", `"dtype" twice`},
		{"metadata value not a string", rawFile(`{"__metadata__":{"format":1}}`, 0), ErrBadHeader, "", `__metadata__["format"] is the number 1`},
		{"metadata not an object", rawFile(`{"__metadata__":[]}`, 0), ErrBadHeader, "", "__metadata__ is an array"},
		{"end before begin", rawFile(`{"a":{"dtype":"U8","shape":[0],"data_offsets":[4,2]}}`, 4), ErrBadHeader, "a", "end before they begin"},
		{"negative dimension", rawFile(`{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}`, 0), ErrBadHeader, "a", "shape[0] = -1"},
		{"fractional offset", rawFile(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1.0]}}`, 1), ErrBadHeader, "a", "data_offsets[1] = 1.0"},
		{"three data_offsets", rawFile(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1,1]}}`, 1), ErrBadHeader, "a", "more than 2 entries"},
		{"missing data_offsets", rawFile(`{"a":{"dtype":"U8","shape":[1]}}`, 1), ErrBadHeader, "a", "no data_offsets"},
		{"tensor entry not an object", rawFile(`{"a":[1]}`, 0), ErrBadHeader, "a", "the tensor's entry is an array: it must be an object"},
		{"dtype not a string", rawFile(`{"a":{"dtype":4,"shape":[1],"data_offsets":[0,1]}}`, 1), ErrBadHeader, "a", "dtype is the number 4"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := writeTemp(t, t.TempDir(), "model.safetensors", tc.data)
			noFDLeak(t, func() {
				c, err := Open(p)
				if err == nil {
					c.Close()
					t.Fatalf("Open succeeded; want %v", tc.sentinel)
				}
				e := wantError(t, err, tc.sentinel, p, tc.tensor)
				if !strings.Contains(e.Error(), tc.reason) {
					t.Errorf("message %q lacks %q", e.Error(), tc.reason)
				}
			})
		})
	}
}

// TestAcceptedEdges: what the format allows opens: an empty file of
// tensors, zero-byte and scalar tensors, the packed dtypes on whole bytes,
// unknown entry fields, padding, a null __metadata__.
func TestAcceptedEdges(t *testing.T) {
	cases := []struct {
		name   string
		data   []byte
		tensor int
		bytes  int64
	}{
		{"no tensors", rawFile(`{}`, 0), 0, 0},
		{"null metadata and padding", rawFile("{\"__metadata__\":null}  \n\t", 0), 0, 0},
		{"zero-byte tensors share an offset", rawFile(`{"e":{"dtype":"F32","shape":[0,5],"data_offsets":[0,0]},"f":{"dtype":"I64","shape":[3,0],"data_offsets":[0,0]},"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]}}`, 8), 3, 8},
		{"F4 on whole bytes and F6 packed", rawFile(`{"a":{"dtype":"F4","shape":[2,3],"data_offsets":[0,3]},"b":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[3,6]}}`, 6), 2, 6},
		{"unknown entry field", rawFile(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"quant":{"x":[1,2]}}}`, 1), 1, 1},
		{"entries in any order", rawFile(`{"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"a":{"shape":[1],"data_offsets":[0,1],"dtype":"U8"}}`, 2), 2, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := writeTemp(t, t.TempDir(), "x.safetensors", tc.data)
			c, err := Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.Len() != tc.tensor || c.TotalBytes() != tc.bytes {
				t.Errorf("%d tensors, %d bytes; want %d, %d", c.Len(), c.TotalBytes(), tc.tensor, tc.bytes)
			}
		})
	}
	// Entries in any order come back in offset order, with absolute offsets.
	p := writeTemp(t, t.TempDir(), "x.safetensors",
		rawFile(`{"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"a":{"shape":[1],"data_offsets":[0,1],"dtype":"U8"}}`, 2))
	c, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hdr := int64(len(`{"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"a":{"shape":[1],"data_offsets":[0,1],"dtype":"U8"}}`))
	ts := c.Tensors()
	if ts[0].Name != "a" || ts[0].Offset != 8+hdr || ts[1].Name != "b" || ts[1].Offset != 9+hdr {
		t.Errorf("tensors %+v, want a at %d then b at %d", ts, 8+hdr, 9+hdr)
	}
}

// shardedFixture writes llamaSpecs(2) in three shards and returns the
// folder, the manifest and the index as parsed JSON, to be broken.
func shardedFixture(t *testing.T) (string, *Manifest, map[string]any) {
	t.Helper()
	dir := t.TempDir()
	m, err := Write(dir, llamaSpecs(2), WriteOptions{Seed: 5, ShardBytes: llamaShardBytes})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(m.Index)
	if err != nil {
		t.Fatal(err)
	}
	var ix map[string]any
	if err := json.Unmarshal(data, &ix); err != nil {
		t.Fatal(err)
	}
	return dir, m, ix
}

// rewriteIndex writes ix over the index at path.
func rewriteIndex(t *testing.T, path string, ix map[string]any) {
	t.Helper()
	data, err := json.Marshal(ix)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBadIndex: each bad sharded checkpoint is an *Error of its kind naming
// the file and tensor at fault, and leaves no descriptor open.
func TestBadIndex(t *testing.T) {
	const shard2 = "model-00002-of-00003.safetensors"
	cases := []struct {
		name     string
		breakIt  func(t *testing.T, dir string, m *Manifest, ix map[string]any)
		sentinel error
		file     func(dir string, m *Manifest) string // the file the error names
		tensor   string
		reason   string
	}{
		{"index names a missing shard", func(t *testing.T, dir string, m *Manifest, ix map[string]any) {
			if err := os.Remove(m.Files[1]); err != nil {
				t.Fatal(err)
			}
		}, ErrMissingShard, func(dir string, m *Manifest) string { return m.Files[1] },
			"model.layers.0.input_layernorm.weight", `the shard "` + shard2 + `" that the index names does not exist`},
		{"index names two missing shards", func(t *testing.T, dir string, m *Manifest, ix map[string]any) {
			for _, f := range m.Files[1:] {
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
			}
		}, ErrMissingShard, func(dir string, m *Manifest) string { return m.Files[1] },
			"model.layers.0.input_layernorm.weight", "2 of the index's 3 shards are missing"},
		{"two shards with the same tensor", func(t *testing.T, dir string, m *Manifest, ix map[string]any) {
			// Shard 2 is replaced by one that also holds shard 1's embedding.
			specs := []TensorSpec{{"model.embed_tokens.weight", BF16, []int64{256, 64}}}
			for _, s := range llamaSpecs(2) {
				if ix["weight_map"].(map[string]any)[s.Name] == shard2 {
					specs = append(specs, s)
				}
			}
			other := t.TempDir()
			if _, err := Write(other, specs, WriteOptions{Seed: 5}); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(other, SingleFileName), m.Files[1]); err != nil {
				t.Fatal(err)
			}
		}, ErrDuplicateTensor, func(dir string, m *Manifest) string { return m.Files[1] },
			"model.embed_tokens.weight", "also in"},
		{"total_size mismatch", func(t *testing.T, dir string, m *Manifest, ix map[string]any) {
			ix["metadata"] = map[string]any{"total_size": 213_633}
			rewriteIndex(t, m.Index, ix)
		}, ErrTotalSize, func(dir string, m *Manifest) string { return m.Index },
			"", "metadata.total_size is 213633 bytes but the shards' tensors add up to 213632 (off by 1)"},
		{"index maps a tensor its shard lacks", func(t *testing.T, dir string, m *Manifest, ix map[string]any) {
			ix["weight_map"].(map[string]any)["model.layers.9.mlp.up_proj.weight"] = shard2
			rewriteIndex(t, m.Index, ix)
		}, ErrIndexMismatch, func(dir string, m *Manifest) string { return m.Files[1] },
			"model.layers.9.mlp.up_proj.weight", "the shard's header has no such tensor"},
		{"shard holds a tensor the index does not list", func(t *testing.T, dir string, m *Manifest, ix map[string]any) {
			delete(ix["weight_map"].(map[string]any), "lm_head.weight")
			rewriteIndex(t, m.Index, ix)
		}, ErrIndexMismatch, func(dir string, m *Manifest) string { return m.Files[2] },
			"lm_head.weight", "does not list it"},
		{"index maps a tensor to another shard", func(t *testing.T, dir string, m *Manifest, ix map[string]any) {
			ix["weight_map"].(map[string]any)["lm_head.weight"] = shard2
			rewriteIndex(t, m.Index, ix)
		}, ErrIndexMismatch, func(dir string, m *Manifest) string { return m.Files[2] },
			"lm_head.weight", `the index maps it to "` + shard2 + `"`},
		{"shard outside the folder", func(t *testing.T, dir string, m *Manifest, ix map[string]any) {
			ix["weight_map"].(map[string]any)["lm_head.weight"] = "../model-00003-of-00003.safetensors"
			rewriteIndex(t, m.Index, ix)
		}, ErrBadIndex, func(dir string, m *Manifest) string { return m.Index },
			"lm_head.weight", "a relative path inside the index's folder"},
		{"absolute shard path", func(t *testing.T, dir string, m *Manifest, ix map[string]any) {
			ix["weight_map"].(map[string]any)["lm_head.weight"] = m.Files[2]
			rewriteIndex(t, m.Index, ix)
		}, ErrBadIndex, func(dir string, m *Manifest) string { return m.Index }, "lm_head.weight", "a relative path"},
		{"index not JSON", func(t *testing.T, dir string, m *Manifest, ix map[string]any) {
			if err := os.WriteFile(m.Index, []byte(`{"weight_map": {"a": `), 0o644); err != nil {
				t.Fatal(err)
			}
		}, ErrBadIndex, func(dir string, m *Manifest) string { return m.Index }, "", "not valid JSON: it breaks at index byte 21"},
		{"index without weight_map", func(t *testing.T, dir string, m *Manifest, ix map[string]any) {
			delete(ix, "weight_map")
			rewriteIndex(t, m.Index, ix)
		}, ErrBadIndex, func(dir string, m *Manifest) string { return m.Index }, "", "no weight_map"},
		{"weight_map lists a tensor twice", func(t *testing.T, dir string, m *Manifest, ix map[string]any) {
			data := `{"weight_map":{"lm_head.weight":"` + shard2 + `","lm_head.weight":"model-00003-of-00003.safetensors"}}`
			if err := os.WriteFile(m.Index, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}, ErrDuplicateTensor, func(dir string, m *Manifest) string { return m.Index }, "lm_head.weight", "weight_map lists this tensor twice"},
		{"total_size not an integer", func(t *testing.T, dir string, m *Manifest, ix map[string]any) {
			ix["metadata"] = map[string]any{"total_size": 1.5}
			rewriteIndex(t, m.Index, ix)
		}, ErrBadIndex, func(dir string, m *Manifest) string { return m.Index }, "", "metadata.total_size = 1.5"},
		{"a truncated shard", func(t *testing.T, dir string, m *Manifest, ix map[string]any) {
			if err := os.Truncate(m.Files[2], 200); err != nil {
				t.Fatal(err)
			}
		}, ErrTruncated, func(dir string, m *Manifest) string { return m.Files[2] }, "", "the file is cut short"},
		{"a shard that is a directory", func(t *testing.T, dir string, m *Manifest, ix map[string]any) {
			if err := os.Remove(m.Files[0]); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(m.Files[0], 0o755); err != nil {
				t.Fatal(err)
			}
		}, ErrNotRegularFile, func(dir string, m *Manifest) string { return m.Files[0] }, "model.embed_tokens.weight", "is a directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, m, ix := shardedFixture(t)
			tc.breakIt(t, dir, m, ix)
			noFDLeak(t, func() {
				c, err := Open(dir)
				if err == nil {
					c.Close()
					t.Fatalf("Open succeeded; want %v", tc.sentinel)
				}
				e := wantError(t, err, tc.sentinel, tc.file(dir, m), tc.tensor)
				if !strings.Contains(e.Error(), tc.reason) {
					t.Errorf("message %q lacks %q", e.Error(), tc.reason)
				}
			})
		})
	}
}

// TestBadPath: paths that hold no checkpoint.
func TestBadPath(t *testing.T) {
	t.Run("path does not exist", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "nope")
		_, err := Open(p)
		wantError(t, err, ErrNoCheckpoint, p, "")
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%v does not wrap fs.ErrNotExist", err)
		}
	})
	t.Run("folder without a checkpoint", func(t *testing.T) {
		dir := t.TempDir()
		writeTemp(t, dir, "consolidated.safetensors", rawFile(`{}`, 0))
		_, err := Open(dir)
		e := wantError(t, err, ErrNoCheckpoint, dir, "")
		if !strings.Contains(e.Reason, "it holds consolidated.safetensors: pass a file's path") {
			t.Errorf("reason %q does not point at consolidated.safetensors", e.Reason)
		}
	})
}
