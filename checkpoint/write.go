package checkpoint

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"unicode/utf8"
)

// DefaultShardBytes is the shard size Write uses when WriteOptions leaves
// ShardBytes 0: 5 GB (5×10^9 bytes), huggingface_hub's MAX_SHARD_SIZE, the
// default of transformers' save_pretrained.
const DefaultShardBytes = 5_000_000_000

// TensorSpec is one tensor Write writes. Which tensors a model family has,
// and their names and shapes, is the caller's: Write takes a list.
type TensorSpec struct {
	// Name is the tensor's key: non-empty UTF-8, not "__metadata__", unique
	// in the list.
	Name string
	// DType is the element type; any valid DType.
	DType DType
	// Shape is the dimensions, outermost first, each ≥ 0; empty for a
	// scalar. Elements × DType.Bits() must be whole bytes and below 2^63.
	Shape []int64
}

// WriteOptions are Write's knobs; the zero value is valid.
type WriteOptions struct {
	// Seed seeds the contents. The same seed, name, dtype and shape give the
	// same bytes, whatever the tensor's place or the sharding.
	Seed uint64
	// ShardBytes is the most tensor bytes per shard (a tensor larger than
	// it gets a shard alone); 0 means DefaultShardBytes. A checkpoint that
	// fits one shard is written as one model.safetensors without an index.
	ShardBytes int64
	// Metadata is every file's __metadata__; nil means {"format": "pt"}, what
	// transformers writes; an empty non-nil map writes none. Keys and values
	// must be UTF-8.
	Metadata map[string]string
	// Zeros writes every tensor's bytes as zeros, and writes them as a hole:
	// each file is its header and then its size set with truncate, so on a
	// filesystem with sparse files (ext4, XFS, tmpfs) a checkpoint of any
	// size takes only its headers' disk and reads back zeros at the page
	// cache's speed. For sizing and loading checks of models larger than
	// the disk (DeepSeek-V3's is 673 GB); Seed is then unused, and
	// Manifest.Checksums is the CRC-32C of each tensor's zero bytes.
	Zeros bool
}

// Manifest is what Write wrote.
type Manifest struct {
	// Index is the path of model.safetensors.index.json, "" when Write wrote
	// one file.
	Index string
	// Files are the paths of the safetensors files, in shard order.
	Files []string
	// TotalBytes is the sum of the tensors' bytes, the index's
	// metadata.total_size.
	TotalBytes int64
	// Checksums maps each tensor's name to the CRC-32C (NewHash) of its
	// bytes as written, so a loader test can compare what reached the device
	// with what the generator meant, independently of the file.
	Checksums map[string]uint32
}

// writeChunk is how many bytes of a tensor Write generates at a time: the
// most memory it holds for contents, whatever the checkpoint's size.
const writeChunk = 1 << 20

// Write writes a safetensors checkpoint of tensors into the folder dir
// (created if missing), with deterministic pseudo-random contents (see
// WriteOptions.Seed; every float is finite and weight-sized), sharded as
// transformers' save_pretrained shards (planShards) with
// model.safetensors.index.json ({"metadata": {"total_size": N},
// "weight_map": {...}}, keys sorted, indented by 2 as transformers writes
// it) when there is more than one shard. Each file is the reference
// writer's layout: header padded to 8 bytes, data ordered by dtype then
// name.
//
// It streams: each tensor is generated 1 MiB at a time through a
// bufio.Writer and hashed as it goes, so memory stays bounded whatever the
// checkpoint's size. Files are written under temporary names and renamed
// when all are complete, the index last, so a folder never shows a partial
// checkpoint; on error the temporary files are removed.
//
// Errors, each an *Error: ErrBadSpec (an empty, reserved or non-UTF-8
// name, a negative dimension or ShardBytes, a total past 2^63-1 bytes),
// ErrDuplicateTensor, ErrUnknownDType, ErrShapeMismatch (packed bits that
// are not whole bytes, overflow), ErrHeaderTooLarge (a shard's header past
// MaxHeaderBytes), ErrExists (dir already holds model.safetensors, the
// index or model-*-of-*.safetensors: Write never mixes two checkpoints),
// ErrWrite (the operating system's failure, as Cause).
func Write(dir string, tensors []TensorSpec, opts WriteOptions) (*Manifest, error) {
	return WriteContext(context.Background(), dir, tensors, opts)
}

// WriteContext is Write that stops when ctx is done: it checks ctx before
// every MiB it generates, removes what it wrote, and returns ctx's error
// (the folder is left as it found it, but for the folder itself when Write
// created it).
func WriteContext(ctx context.Context, dir string, tensors []TensorSpec, opts WriteOptions) (*Manifest, error) {
	sizes, total, err := checkSpecs(dir, tensors, opts)
	if err != nil {
		return nil, err
	}
	meta := opts.Metadata
	if meta == nil {
		meta = map[string]string{"format": "pt"}
	}
	for k, v := range meta {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, fail(ErrBadSpec, dir, "", "a __metadata__ key or value is not UTF-8: "+quote(k))
		}
	}
	maxBytes := opts.ShardBytes
	if maxBytes == 0 {
		maxBytes = DefaultShardBytes
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, failCause(ErrWrite, dir, "", "cannot create the folder", err)
	}
	if err := checkNoCheckpoint(dir); err != nil {
		return nil, err
	}
	shards := planShards(tensors, sizes, maxBytes)
	m := &Manifest{TotalBytes: total, Checksums: make(map[string]uint32, len(tensors))}
	var temps []string // temporary files, renamed or removed at the end
	defer func() {
		for _, t := range temps {
			_ = os.Remove(t)
		}
	}()
	buf := make([]byte, writeChunk)
	for _, s := range shards {
		final := filepath.Join(dir, s.name)
		tmp, err := writeShard(ctx, dir, final, s, meta, opts, buf, m.Checksums)
		if tmp != "" {
			temps = append(temps, tmp)
		}
		if err != nil {
			return nil, err
		}
		m.Files = append(m.Files, final)
	}
	if len(shards) > 1 {
		m.Index = filepath.Join(dir, IndexFileName)
		tmp, err := writeIndex(dir, m.Index, shards, total)
		if tmp != "" {
			temps = append(temps, tmp)
		}
		if err != nil {
			return nil, err
		}
	}
	finals := slices.Clone(m.Files)
	if m.Index != "" {
		finals = append(finals, m.Index)
	}
	for i, final := range finals {
		if err := os.Rename(temps[i], final); err != nil {
			for _, done := range finals[:i] {
				_ = os.Remove(done)
			}
			return nil, failCause(ErrWrite, final, "", "cannot rename the finished file into place", err)
		}
	}
	temps = nil
	return m, nil
}

// checkSpecs validates the tensor list and returns each tensor's bytes and
// their sum.
func checkSpecs(dir string, tensors []TensorSpec, opts WriteOptions) ([]int64, int64, error) {
	if opts.ShardBytes < 0 {
		return nil, 0, fail(ErrBadSpec, dir, "", "ShardBytes = "+strconv.FormatInt(opts.ShardBytes, 10)+": it must be ≥ 0 (0 means DefaultShardBytes)")
	}
	sizes := make([]int64, len(tensors))
	seen := make(map[string]struct{}, len(tensors))
	var total int64
	for i, t := range tensors {
		switch {
		case t.Name == "":
			return nil, 0, fail(ErrBadSpec, dir, "", "tensor #"+strconv.Itoa(i)+" has an empty name")
		case !utf8.ValidString(t.Name):
			return nil, 0, fail(ErrBadSpec, dir, t.Name, "the name is not UTF-8 (a header is JSON text)")
		case t.Name == metadataKey:
			return nil, 0, fail(ErrBadSpec, dir, t.Name, "the name is reserved for the header's metadata")
		case !t.DType.Valid():
			return nil, 0, fail(ErrUnknownDType, dir, t.Name, t.DType.String()+" is not a DType constant")
		}
		if _, dup := seen[t.Name]; dup {
			return nil, 0, fail(ErrDuplicateTensor, dir, t.Name, "the list holds this name twice")
		}
		seen[t.Name] = struct{}{}
		shape := make([]uint64, len(t.Shape))
		for k, d := range t.Shape {
			if d < 0 {
				return nil, 0, fail(ErrBadSpec, dir, t.Name, "shape "+formatShape(t.Shape)+" has a negative dimension")
			}
			shape[k] = uint64(d)
		}
		n, reason, ok := tensorBytes(t.DType, shape)
		if !ok {
			return nil, 0, fail(ErrShapeMismatch, dir, t.Name, reason)
		}
		if int64(n) > math.MaxInt64-total {
			return nil, 0, fail(ErrBadSpec, dir, t.Name, "the tensors add up to more than 2^63-1 bytes")
		}
		sizes[i] = int64(n)
		total += int64(n)
	}
	return sizes, total, nil
}

// checkNoCheckpoint refuses a folder that already holds checkpoint files.
func checkNoCheckpoint(dir string) error {
	for _, name := range []string{SingleFileName, IndexFileName} {
		p := filepath.Join(dir, name)
		if _, err := os.Lstat(p); err == nil {
			return fail(ErrExists, p, "", "the folder already holds a checkpoint: write into an empty folder or remove it first")
		} else if !errors.Is(err, fs.ErrNotExist) {
			return failCause(ErrWrite, p, "", "cannot check the folder", err)
		}
	}
	shards, err := filepath.Glob(filepath.Join(dir, "model-*-of-*.safetensors"))
	if err != nil {
		return failCause(ErrWrite, dir, "", "cannot list the folder", err)
	}
	if len(shards) > 0 {
		return fail(ErrExists, shards[0], "", "the folder already holds checkpoint shards: write into an empty folder or remove them first")
	}
	return nil
}

// writeShard writes one shard to a temporary file in dir and returns its
// path (also on error, so the caller removes it).
func writeShard(ctx context.Context, dir, final string, s plannedShard, meta map[string]string, opts WriteOptions, buf []byte, sums map[string]uint32) (string, error) {
	header := encodeHeader(meta, s.tensors)
	if len(header) > MaxHeaderBytes {
		return "", fail(ErrHeaderTooLarge, final, "", "the header would be "+strconv.Itoa(len(header))+
			" bytes, more than the format's cap of "+strconv.Itoa(MaxHeaderBytes)+": use a smaller ShardBytes")
	}
	f, err := os.CreateTemp(dir, ".gpuarena-write-*.tmp")
	if err != nil {
		return "", failCause(ErrWrite, final, "", "cannot create a temporary file", err)
	}
	tmp := f.Name()
	w := bufio.NewWriterSize(f, writeChunk)
	abort := func(tensor, what string, err error) (string, error) {
		_ = f.Close()
		return tmp, failCause(ErrWrite, final, tensor, what, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return abort("", "cannot make the file readable", err)
	}
	var lenBuf [headerLenBytes]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(header)))
	if _, err := w.Write(lenBuf[:]); err != nil {
		return abort("", "cannot write the header", err)
	}
	if _, err := w.Write(header); err != nil {
		return abort("", "cannot write the header", err)
	}
	for _, t := range s.tensors {
		if opts.Zeros { // the data area is a hole: see below
			sums[t.spec.Name] = zerosChecksum(t.bytes)
			continue
		}
		gen := newFiller(opts.Seed, t.spec.Name, t.spec.DType)
		h := NewHash()
		for left := t.bytes; left > 0; {
			if err := ctx.Err(); err != nil {
				_ = f.Close()
				return tmp, err
			}
			n := min(left, int64(len(buf)))
			p := buf[:n]
			gen.fill(p)
			_, _ = h.Write(p) // a hash.Hash never fails
			if _, err := w.Write(p); err != nil {
				return abort(t.spec.Name, "cannot write the tensor's bytes", err)
			}
			left -= n
		}
		sums[t.spec.Name] = h.Sum32()
	}
	if err := w.Flush(); err != nil {
		return abort("", "cannot write the file", err)
	}
	if opts.Zeros {
		// Past the header, the size alone: the data area reads as zeros
		// and, on a filesystem with sparse files, takes no disk.
		if err := f.Truncate(int64(headerLenBytes+len(header)) + s.bytes); err != nil {
			return abort("", "cannot size the file", err)
		}
	}
	if err := f.Close(); err != nil {
		return tmp, failCause(ErrWrite, final, "", "cannot close the file", err)
	}
	return tmp, nil
}

// writeIndex writes model.safetensors.index.json to a temporary file in
// dir and returns its path (also on error).
func writeIndex(dir, final string, shards []plannedShard, total int64) (string, error) {
	weightMap := make(map[string]string)
	for _, s := range shards {
		for _, t := range s.tensors {
			weightMap[t.spec.Name] = s.name
		}
	}
	doc := struct {
		Metadata  map[string]int64  `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}{map[string]int64{"total_size": total}, weightMap}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return "", failCause(ErrWrite, final, "", "cannot encode the index", err)
	}
	data = append(data, '\n')
	f, err := os.CreateTemp(dir, ".gpuarena-write-*.tmp")
	if err != nil {
		return "", failCause(ErrWrite, final, "", "cannot create a temporary file", err)
	}
	tmp := f.Name()
	if err := f.Chmod(0o644); err != nil {
		_ = f.Close()
		return tmp, failCause(ErrWrite, final, "", "cannot make the index readable", err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return tmp, failCause(ErrWrite, final, "", "cannot write the index", err)
	}
	if err := f.Close(); err != nil {
		return tmp, failCause(ErrWrite, final, "", "cannot close the index", err)
	}
	return tmp, nil
}
