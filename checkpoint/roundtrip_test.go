package checkpoint

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// llamaShardBytes splits llamaSpecs(2) (213,632 bytes) into three shards:
// the embedding and layer 0's attention and gate (73,728 bytes), the rest
// of layer 0 and layer 1's attention and gate (73,984), the rest (65,920).
const llamaShardBytes = 75_000

// TestRoundTripSharded writes a small Llama-shaped checkpoint in three
// shards, opens it three ways, and reads every tensor back: the bytes hash
// to the generator's checksums and decode to finite weight-sized BF16.
func TestRoundTripSharded(t *testing.T) {
	dir := t.TempDir()
	specs := llamaSpecs(2)
	m, err := Write(dir, specs, WriteOptions{Seed: 7, ShardBytes: llamaShardBytes})
	if err != nil {
		t.Fatal(err)
	}
	shardNames := []string{"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"}
	wantFiles := []string{filepath.Join(dir, shardNames[0]), filepath.Join(dir, shardNames[1]), filepath.Join(dir, shardNames[2])}
	if !slices.Equal(m.Files, wantFiles) || m.Index != filepath.Join(dir, IndexFileName) {
		t.Fatalf("wrote %q and index %q, want %q and %q", m.Files, m.Index, wantFiles, filepath.Join(dir, IndexFileName))
	}
	if m.TotalBytes != 213_632 || len(m.Checksums) != 21 {
		t.Fatalf("manifest: %d bytes, %d checksums; want 213632, 21", m.TotalBytes, len(m.Checksums))
	}
	checkIndexFile(t, m.Index, shardNames)

	for _, path := range []string{dir, m.Index} {
		c, err := Open(path)
		if err != nil {
			t.Fatalf("Open(%s): %v", path, err)
		}
		checkLlama(t, c, specs, m)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// One shard alone opens as a single file with its own six tensors.
	c, err := Open(m.Files[2])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Len() != 6 || c.Index() != "" || c.TotalBytes() != 65_920 {
		t.Errorf("shard 3 alone: %d tensors, index %q, %d bytes; want 6, \"\", 65920", c.Len(), c.Index(), c.TotalBytes())
	}
}

// checkIndexFile checks the index Write wrote, byte for byte where it
// matters: transformers' layout with total_size and a sorted weight_map.
func checkIndexFile(t *testing.T, path string, shards []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "{\n  \"metadata\": {\n    \"total_size\": 213632\n  },\n  \"weight_map\": {\n    \"lm_head.weight\": \"model-00003-of-00003.safetensors\",\n") {
		t.Errorf("index begins %.160q", data)
	}
	var ix struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(data, &ix); err != nil {
		t.Fatal(err)
	}
	perShard := map[string]int{}
	for _, s := range ix.WeightMap {
		perShard[s]++
	}
	if perShard[shards[0]] != 6 || perShard[shards[1]] != 9 || perShard[shards[2]] != 6 {
		t.Errorf("tensors per shard %v, want 6, 9, 6", perShard)
	}
	for name, shard := range map[string]string{
		"model.embed_tokens.weight":                      shards[0],
		"model.layers.0.mlp.gate_proj.weight":            shards[0],
		"model.layers.0.mlp.up_proj.weight":              shards[1],
		"model.layers.1.mlp.gate_proj.weight":            shards[1],
		"model.layers.1.mlp.up_proj.weight":              shards[2],
		"model.layers.1.post_attention_layernorm.weight": shards[2],
	} {
		if ix.WeightMap[name] != shard {
			t.Errorf("weight_map[%s] = %q, want %q", name, ix.WeightMap[name], shard)
		}
	}
}

// checkLlama checks an opened llamaSpecs(2) checkpoint against what Write
// wrote.
func checkLlama(t *testing.T, c *Checkpoint, specs []TensorSpec, m *Manifest) {
	t.Helper()
	if c.Len() != len(specs) || c.TotalBytes() != m.TotalBytes {
		t.Fatalf("%d tensors of %d bytes, want %d of %d", c.Len(), c.TotalBytes(), len(specs), m.TotalBytes)
	}
	shards := c.Shards()
	if len(shards) != 3 {
		t.Fatalf("%d shards, want 3", len(shards))
	}
	for i, s := range shards {
		if s.Path != m.Files[i] || s.Metadata["format"] != "pt" || s.DataOffset%8 != 0 {
			t.Errorf("shard %d: %+v; want path %s, format pt, 8-aligned data", i, s, m.Files[i])
		}
	}
	// Order: shard by shard; within one, by offset, which for one dtype is
	// by name (the reference writer's order).
	tensors := c.Tensors()
	var prev Tensor
	var sum int64
	for i, got := range tensors {
		if i > 0 && got.File == prev.File {
			if got.Offset != prev.Offset+prev.Bytes || got.Name < prev.Name {
				t.Errorf("%s at %d follows %s at %d+%d", got.Name, got.Offset, prev.Name, prev.Offset, prev.Bytes)
			}
		}
		prev = got
		sum += got.Bytes
	}
	if want := []string{"model.embed_tokens.weight", "model.layers.0.mlp.gate_proj.weight", "model.layers.0.self_attn.k_proj.weight",
		"model.layers.0.self_attn.o_proj.weight", "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.v_proj.weight",
		"model.layers.0.input_layernorm.weight"}; !slices.Equal(names(tensors[:7]), want) {
		t.Errorf("first tensors %q, want %q", names(tensors[:7]), want)
	}
	if sum != m.TotalBytes {
		t.Errorf("tensors sum to %d, want %d", sum, m.TotalBytes)
	}
	for _, spec := range specs {
		got, ok := c.Tensor(spec.Name)
		if !ok {
			t.Fatalf("no tensor %s", spec.Name)
		}
		if got.DType != BF16 || !slices.Equal(got.Shape, spec.Shape) || got.Bytes != 2*got.Elements() {
			t.Errorf("%s: %s %v %d bytes, want BF16 %v %d", spec.Name, got.DType, got.Shape, got.Bytes, spec.Shape, 2*got.Elements())
		}
		r, err := c.Section(spec.Name)
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(r)
		if err != nil || int64(len(data)) != got.Bytes {
			t.Fatalf("%s: read %d bytes, %v; want %d", spec.Name, len(data), err, got.Bytes)
		}
		if sum := crc32.Checksum(data, castagnoli); sum != m.Checksums[spec.Name] {
			t.Errorf("%s: bytes hash to %#x, the generator wrote %#x", spec.Name, sum, m.Checksums[spec.Name])
		}
		if sum, err := c.Checksum(spec.Name); err != nil || sum != m.Checksums[spec.Name] {
			t.Errorf("%s: Checksum = %#x, %v; want %#x", spec.Name, sum, err, m.Checksums[spec.Name])
		}
		for i := 0; i < len(data); i += 2 {
			v := math.Float32frombits(uint32(binary.LittleEndian.Uint16(data[i:])) << 16)
			if a := math.Abs(float64(v)); !(a >= 1.0/128 && a < 0.125) {
				t.Fatalf("%s[%d] = %g, outside ±[2^-7, 2^-3)", spec.Name, i/2, v)
			}
		}
	}
	if _, ok := c.Tensor("model.layers.2.mlp.up_proj.weight"); ok {
		t.Error("found a tensor the checkpoint does not hold")
	}
}

// names lists the tensors' names.
func names(ts []Tensor) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

// TestRoundTripSingleFile: a checkpoint under ShardBytes is one
// model.safetensors without an index, with the same bytes per tensor as the
// sharded one (contents do not depend on sharding).
func TestRoundTripSingleFile(t *testing.T) {
	specs := llamaSpecs(2)
	sharded, err := Write(t.TempDir(), specs, WriteOptions{Seed: 7, ShardBytes: llamaShardBytes})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	single, err := Write(dir, specs, WriteOptions{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if single.Index != "" || !slices.Equal(single.Files, []string{filepath.Join(dir, SingleFileName)}) {
		t.Fatalf("wrote %q, index %q; want one model.safetensors", single.Files, single.Index)
	}
	for name, sum := range sharded.Checksums {
		if single.Checksums[name] != sum {
			t.Errorf("%s: %#x sharded, %#x in one file", name, sum, single.Checksums[name])
		}
	}
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Index() != "" || c.Len() != 21 || c.TotalBytes() != 213_632 {
		t.Errorf("index %q, %d tensors, %d bytes; want \"\", 21, 213632", c.Index(), c.Len(), c.TotalBytes())
	}
	// 8 + header + data is the whole file.
	s := c.Shards()[0]
	if s.Size != s.DataOffset+c.TotalBytes() || s.Tensors != 21 {
		t.Errorf("shard %+v: size is not data offset + %d bytes, or not 21 tensors", s, c.TotalBytes())
	}
}

// TestGoldenChecksums pins the generator's output: a change to the
// contents of generated checkpoints shows here.
func TestGoldenChecksums(t *testing.T) {
	dir := t.TempDir()
	m, err := Write(dir, llamaSpecs(1), WriteOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]uint32{
		"model.embed_tokens.weight":              0x85ae23f4,
		"model.layers.0.self_attn.q_proj.weight": 0x86df0c9a,
		"lm_head.weight":                         0x7817ffb5,
	} {
		if got := m.Checksums[name]; got != want {
			t.Errorf("%s: checksum %#x, want %#x", name, got, want)
		}
	}
	// The first four values of the final norm's weight, as BF16 bits:
	// -0.1177, 0.0388, 0.0211, 0.0284.
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Section("model.norm.weight")
	if err != nil {
		t.Fatal(err)
	}
	var first [8]byte
	if _, err := r.ReadAt(first[:], 0); err != nil {
		t.Fatal(err)
	}
	got := []uint16{binary.LittleEndian.Uint16(first[0:]), binary.LittleEndian.Uint16(first[2:]),
		binary.LittleEndian.Uint16(first[4:]), binary.LittleEndian.Uint16(first[6:])}
	if want := []uint16{0xbdf1, 0x3d1f, 0x3cad, 0x3ce9}; !slices.Equal(got, want) {
		t.Errorf("model.norm.weight begins %#04x, want %#04x", got, want)
	}
}

// TestSectionAndClose: sections read concurrently-safe ranges; after Close
// Section refuses, reads fail, a second Close is a no-op, and no descriptor
// is left open.
func TestSectionAndClose(t *testing.T) {
	dir := t.TempDir()
	m, err := Write(dir, llamaSpecs(1), WriteOptions{Seed: 3, ShardBytes: 40_000})
	if err != nil {
		t.Fatal(err)
	}
	noFDLeak(t, func() {
		before := openFDs(t)
		c, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := openFDs(t); before >= 0 && got != before+len(m.Files) {
			t.Errorf("%d descriptors open with %d shards, %d before Open; want one per shard", got, len(m.Files), before)
		}
		name := "model.layers.0.mlp.down_proj.weight"
		r, err := c.Section(name)
		if err != nil {
			t.Fatal(err)
		}
		if r.Size() != 16_384 {
			t.Errorf("section of %d bytes, want 16384", r.Size())
		}
		tail := make([]byte, 4)
		if _, err := r.ReadAt(tail, r.Size()-4); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Section("nope"); err == nil {
			t.Error("Section of an unknown name succeeded")
		} else {
			wantError(t, err, ErrUnknownTensor, m.Index, "nope")
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if _, err := r.ReadAt(tail, 0); err == nil || !strings.Contains(err.Error(), "closed") {
			t.Errorf("read after Close: %v, want a closed-file error", err)
		}
		_, err = c.Section(name)
		wantError(t, err, ErrClosed, m.Index, name)
		_, err = c.Checksum(name)
		wantError(t, err, ErrClosed, m.Index, name)
	})
}

// TestConcurrentReads: many goroutines read the same checkpoint at once
// (run with -race); every checksum agrees with the generator's.
func TestConcurrentReads(t *testing.T) {
	dir := t.TempDir()
	m, err := Write(dir, llamaSpecs(2), WriteOptions{Seed: 9, ShardBytes: llamaShardBytes})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			ts := c.Tensors()
			for i := range ts {
				tn := ts[(i+g*3)%len(ts)]
				sum, err := c.Checksum(tn.Name)
				if err == nil && sum != m.Checksums[tn.Name] {
					err = fmt.Errorf("%s: %#x, want %#x", tn.Name, sum, m.Checksums[tn.Name])
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestOpenHFCacheLayout: a Hugging Face cache snapshot is a folder of
// symlinks into ../../blobs; Open follows them and names the files by the
// paths it was given.
func TestOpenHFCacheLayout(t *testing.T) {
	root := t.TempDir()
	blobs, snap := filepath.Join(root, "blobs"), filepath.Join(root, "snapshots", "abc123")
	m, err := Write(blobs, llamaSpecs(2), WriteOptions{Seed: 2, ShardBytes: llamaShardBytes})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range append(slices.Clone(m.Files), m.Index) {
		if err := os.Symlink(filepath.Join("..", "..", "blobs", filepath.Base(f)), filepath.Join(snap, filepath.Base(f))); err != nil {
			t.Skip(err)
		}
	}
	c, err := Open(snap)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Len() != 21 || c.Shards()[0].Path != filepath.Join(snap, "model-00001-of-00003.safetensors") {
		t.Errorf("%d tensors, first shard %s; want 21 under %s", c.Len(), c.Shards()[0].Path, snap)
	}
	if sum, err := c.Checksum("lm_head.weight"); err != nil || sum != m.Checksums["lm_head.weight"] {
		t.Errorf("lm_head.weight: %#x, %v; want %#x", sum, err, m.Checksums["lm_head.weight"])
	}
}

// TestOpenPrefersSingleFile: a folder with both model.safetensors and an
// index opens the single file, the order transformers' from_pretrained
// looks in.
func TestOpenPrefersSingleFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := Write(dir, llamaSpecs(1), WriteOptions{ShardBytes: 50_000}); err != nil {
		t.Fatal(err)
	}
	writeTemp(t, dir, SingleFileName, rawFile(`{"x":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`, 2))
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Index() != "" || c.Len() != 1 {
		t.Errorf("index %q, %d tensors; want the single file's one tensor", c.Index(), c.Len())
	}
}
