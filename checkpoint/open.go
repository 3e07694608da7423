package checkpoint

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Open opens the safetensors checkpoint at path and checks every header
// before it returns; it reads the 8-byte length and the header of each
// file (and the index), never tensor data. path is one of:
//   - a model folder: its model.safetensors when present, else its
//     model.safetensors.index.json (the order transformers'
//     from_pretrained looks for them in);
//   - an index file (a name ending in ".json"), whose shards are found in
//     the index's folder;
//   - a single safetensors file (any other name).
//
// Symlinks are followed (a Hugging Face cache's snapshot folder is
// symlinks into its blobs). The checks, each failure an *Error naming the
// file and, where one is at fault, the tensor:
//   - the path exists and holds a checkpoint (ErrNoCheckpoint); every file
//     is a regular file (ErrNotRegularFile);
//   - the index is JSON with a non-empty weight_map of shard names inside
//     its folder (ErrBadIndex, ErrDuplicateTensor), and every shard it names
//     is there (ErrMissingShard), all checked before any shard's header is
//     read;
//   - each file: the 8-byte little-endian header length is at most
//     MaxHeaderBytes (ErrHeaderTooLarge) and inside the file (ErrTruncated);
//     the header is a JSON object of tensors and __metadata__ (ErrBadHeader,
//     ErrDuplicateTensor); each dtype is known (ErrUnknownDType); shape ×
//     dtype size equals the byte range's length (ErrShapeMismatch); the
//     ranges, sorted, tile the data area exactly: no overlap (ErrOverlap),
//     no hole (ErrHole), none past its end (ErrTruncated);
//   - across shards: no tensor in two shards (ErrDuplicateTensor); each
//     shard holds exactly the tensors the index maps to it
//     (ErrIndexMismatch); metadata.total_size, when given, equals the sum of
//     the tensors' bytes (ErrTotalSize).
//
// A failed stat, open or read is ErrRead with the operating system's error
// as Cause. The first failure in that order is returned; shards are checked in
// sorted name order. On error every file Open opened is closed again. On
// success the Checkpoint keeps one descriptor open per file, for Section,
// until Close.
func Open(path string) (*Checkpoint, error) {
	info, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, failCause(ErrNoCheckpoint, path, "", "the path does not exist", err)
		}
		return nil, failCause(ErrRead, path, "", "cannot stat the path", err)
	}
	if !info.IsDir() {
		if strings.HasSuffix(path, ".json") {
			return openIndexed(path)
		}
		return openSingle(path)
	}
	single := filepath.Join(path, SingleFileName)
	if _, err := os.Stat(single); err == nil {
		return openSingle(single)
	}
	ix := filepath.Join(path, IndexFileName)
	if _, err := os.Stat(ix); err == nil {
		return openIndexed(ix)
	}
	reason := "the folder holds neither " + SingleFileName + " nor " + IndexFileName
	if others, _ := filepath.Glob(filepath.Join(path, "*.safetensors")); len(others) > 0 {
		reason += "; it holds " + filepath.Base(others[0])
		if len(others) > 1 {
			reason += " and " + strconv.Itoa(len(others)-1) + " more .safetensors files"
		}
		reason += ": pass a file's path to open it alone"
	}
	return nil, fail(ErrNoCheckpoint, path, "", reason)
}

// openSingle opens an unsharded checkpoint.
func openSingle(path string) (*Checkpoint, error) {
	f, size, err := openRegular(path, ErrNoCheckpoint, "", "the checkpoint file")
	if err != nil {
		return nil, err
	}
	s, err := readShard(f, path, size)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return assemble("", []*shardFile{s})
}

// openIndexed opens a sharded checkpoint from its index.
func openIndexed(path string) (*Checkpoint, error) {
	f, size, err := openRegular(path, ErrNoCheckpoint, "", "the index")
	if err != nil {
		return nil, err
	}
	ix, err := readIndex(f, path, size)
	_ = f.Close()
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	firstTensor := make(map[string]string, len(ix.shards)) // shard → its first tensor by name, for errors
	for name, shard := range ix.weightMap {
		if t, ok := firstTensor[shard]; !ok || name < t {
			firstTensor[shard] = name
		}
	}
	// Every shard must be there before any header is read.
	files := make([]*os.File, len(ix.shards))
	sizes := make([]int64, len(ix.shards))
	var firstErr error
	var missing []string
	for i, shard := range ix.shards {
		p := filepath.Join(dir, filepath.FromSlash(shard))
		files[i], sizes[i], err = openRegular(p, ErrMissingShard, firstTensor[shard], "the shard "+quote(shard)+" that the index names")
		if err != nil {
			if errors.Is(err, ErrMissingShard) {
				missing = append(missing, shard)
			}
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	if firstErr != nil {
		closeAll(files)
		if e := (*Error)(nil); errors.As(firstErr, &e) && e.Err == ErrMissingShard && len(missing) > 1 {
			e.Reason += " (" + strconv.Itoa(len(missing)) + " of the index's " + strconv.Itoa(len(ix.shards)) +
				" shards are missing, the first " + quote(missing[0]) + ", the last " + quote(missing[len(missing)-1]) +
				"): download the checkpoint again"
		}
		return nil, firstErr
	}
	shards := make([]*shardFile, len(ix.shards))
	for i := range ix.shards {
		p := filepath.Join(dir, filepath.FromSlash(ix.shards[i]))
		if shards[i], err = readShard(files[i], p, sizes[i]); err != nil {
			closeAll(files)
			return nil, err
		}
	}
	if err := checkAgainstIndex(path, ix, shards); err != nil {
		closeAll(files)
		return nil, err
	}
	return assemble(path, shards)
}

// checkAgainstIndex checks the shards' headers against each other and the
// index: no tensor in two shards, each shard holding exactly the tensors
// the index maps to it, total_size equal to the sum of the tensors' bytes.
func checkAgainstIndex(indexPath string, ix *index, shards []*shardFile) error {
	where := make(map[string]int, len(ix.weightMap)) // tensor → shard
	for i, s := range shards {
		for _, t := range s.tensors {
			if j, dup := where[t.name]; dup {
				return fail(ErrDuplicateTensor, s.info.Path, t.name, "the tensor is also in "+quote(shards[j].info.Path)+
					": a checkpoint holds each tensor once (the index maps it to "+quote(ix.weightMap[t.name])+")")
			}
			where[t.name] = i
		}
	}
	var total int64
	for i, s := range shards {
		for _, t := range s.tensors {
			mapped, ok := ix.weightMap[t.name]
			if !ok {
				return fail(ErrIndexMismatch, s.info.Path, t.name, "the shard holds this tensor but the index's weight_map does not list it: "+
					"the index is stale, or the shard belongs to another checkpoint")
			}
			if mapped != ix.shards[i] {
				return fail(ErrIndexMismatch, s.info.Path, t.name, "the shard holds this tensor but the index maps it to "+quote(mapped))
			}
			if int64(t.bytes) > math.MaxInt64-total {
				return fail(ErrTotalSize, indexPath, t.name, "the tensors' bytes add up to more than 2^63-1")
			}
			total += int64(t.bytes)
		}
	}
	if len(where) != len(ix.weightMap) {
		names := make([]string, 0, len(ix.weightMap))
		for name := range ix.weightMap {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			if _, ok := where[name]; !ok {
				shard := ix.weightMap[name]
				p := filepath.Join(filepath.Dir(indexPath), filepath.FromSlash(shard))
				return fail(ErrIndexMismatch, p, name, "the index maps this tensor to this shard, but the shard's header has no such tensor ("+
					strconv.Itoa(len(ix.weightMap)-len(where))+" of the index's tensors are in no shard)")
			}
		}
	}
	if ix.hasTotal && ix.totalSize != total {
		return fail(ErrTotalSize, indexPath, "", "metadata.total_size is "+strconv.FormatInt(ix.totalSize, 10)+
			" bytes but the shards' tensors add up to "+strconv.FormatInt(total, 10)+" (off by "+
			strconv.FormatInt(ix.totalSize-total, 10)+"): the index does not describe these shards")
	}
	return nil
}

// closeAll closes every non-nil file, ignoring errors: it runs on a path
// that already returns an error, and a read-only close loses no data.
func closeAll(files []*os.File) {
	for _, f := range files {
		if f != nil {
			_ = f.Close()
		}
	}
}

// assemble builds the Checkpoint from checked shards: tensors in shard
// order, then offset order.
func assemble(indexPath string, shards []*shardFile) (*Checkpoint, error) {
	n, dims := 0, 0
	for _, s := range shards {
		n += len(s.tensors)
		for _, t := range s.tensors {
			dims += len(t.shape)
		}
	}
	c := &Checkpoint{
		index:   indexPath,
		files:   make([]shardRef, len(shards)),
		tensors: make([]Tensor, 0, n),
		fileOf:  make([]int, 0, n),
		byName:  make(map[string]int, n),
	}
	shape := make([]int64, dims) // one backing array for every shape
	for i, s := range shards {
		c.files[i] = shardRef{f: s.f, info: s.info}
		for _, t := range s.tensors {
			sh := shape[:len(t.shape):len(t.shape)]
			shape = shape[len(t.shape):]
			for k, d := range t.shape {
				sh[k] = int64(d)
			}
			c.byName[t.name] = len(c.tensors)
			c.fileOf = append(c.fileOf, i)
			c.tensors = append(c.tensors, Tensor{
				Name:   t.name,
				DType:  t.dtype,
				Shape:  sh,
				File:   s.info.Path,
				Offset: s.info.DataOffset + int64(t.begin),
				Bytes:  int64(t.bytes),
			})
			c.total += int64(t.bytes)
		}
	}
	return c, nil
}
