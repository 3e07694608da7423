package checkpoint

import (
	"io"
	"maps"
	"os"
	"slices"
	"sync"
)

// Checkpoint is a checked safetensors checkpoint, one file or a sharded
// set, with one read-only descriptor open per file until Close. Its methods
// are safe for concurrent use; the tensor table never changes after Open.
//
// Holding the descriptors means a file renamed or replaced after Open is
// still the one that was checked; a file rewritten in place is not locked
// against, and reads return what it holds now (a loader that must be sure
// compares Checksum with its own hash of what it uploaded).
type Checkpoint struct {
	index   string     // the index's path, "" for one file
	files   []shardRef // in shard order
	tensors []Tensor   // by shard, then offset
	fileOf  []int      // fileOf[i] is the index in files of tensors[i]'s file
	byName  map[string]int
	total   int64

	mu     sync.Mutex // guards closed and Close
	closed bool
}

// shardRef is one open file of a Checkpoint.
type shardRef struct {
	f    *os.File
	info Shard
}

// Len is the number of tensors.
func (c *Checkpoint) Len() int { return len(c.tensors) }

// TotalBytes is the sum of every tensor's Bytes: the device memory the
// weights take, unaligned. For a sharded checkpoint whose index gives
// metadata.total_size, Open checked they are equal.
func (c *Checkpoint) TotalBytes() int64 { return c.total }

// Index is the path of the model.safetensors.index.json Open read, or ""
// for a checkpoint of one file.
func (c *Checkpoint) Index() string { return c.index }

// Tensors returns every tensor in a stable order: by shard (the index's
// shard names sorted, as transformers orders them; one file has one shard),
// then by Offset within the shard. That is the order a loader reading each
// file front to back wants. The slice and the Shape slices are a fresh copy
// the caller may keep and modify.
func (c *Checkpoint) Tensors() []Tensor {
	out := slices.Clone(c.tensors)
	dims := 0
	for _, t := range out {
		dims += len(t.Shape)
	}
	shape := make([]int64, dims)
	for i := range out {
		n := copy(shape, out[i].Shape)
		out[i].Shape = shape[:n:n]
		shape = shape[n:]
	}
	return out
}

// Tensor returns the tensor called name, and false when there is none. Its
// Shape is a fresh copy.
func (c *Checkpoint) Tensor(name string) (Tensor, bool) {
	i, ok := c.byName[name]
	if !ok {
		return Tensor{}, false
	}
	t := c.tensors[i]
	t.Shape = slices.Clone(t.Shape)
	return t, true
}

// Shards returns the checkpoint's files in shard order, each with its size,
// data offset and __metadata__ (Metadata maps are fresh copies).
func (c *Checkpoint) Shards() []Shard {
	out := make([]Shard, len(c.files))
	for i, f := range c.files {
		out[i] = f.info
		if f.info.Metadata != nil {
			out[i].Metadata = maps.Clone(f.info.Metadata)
		}
	}
	return out
}

// Section returns a reader over the bytes of the tensor called name: an
// *io.SectionReader of Bytes bytes over the shard's descriptor, whose ReadAt
// is pread(2) (os.File.ReadAt), so any number of sections read concurrently
// without sharing a file position, and no byte reaches memory before it is
// read. Errors: an *Error wrapping ErrUnknownTensor for a name the checkpoint
// does not hold, ErrClosed after Close. A read after Close fails with
// os.ErrClosed; a read of a file truncated since Open ends early with
// io.EOF (io.ReadFull reports io.ErrUnexpectedEOF).
func (c *Checkpoint) Section(name string) (*io.SectionReader, error) {
	i, ok := c.byName[name]
	if !ok {
		return nil, fail(ErrUnknownTensor, c.where(), name, "the checkpoint holds no tensor of this name")
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, fail(ErrClosed, c.where(), name, "the checkpoint was closed")
	}
	t := c.tensors[i]
	return io.NewSectionReader(c.files[c.fileOf[i]].f, t.Offset, t.Bytes), nil
}

// where is the path errors about the whole checkpoint name: the index, or
// the one file.
func (c *Checkpoint) where() string {
	if c.index != "" {
		return c.index
	}
	return c.files[0].info.Path
}

// Close closes every file. It is idempotent: a second call does nothing and
// returns nil. It closes all files even when one fails and returns the
// first failure (an *os.PathError; closing a read-only file loses nothing).
func (c *Checkpoint) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	for _, f := range c.files {
		if err := f.f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}
