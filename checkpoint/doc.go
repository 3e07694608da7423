// Package checkpoint reads and writes safetensors checkpoints, one file or
// sharded with a model.safetensors.index.json, as Hugging Face publishes
// model weights. It is pure Go: no actors, no GPU; a loader (the Manager's
// LoadWeights) builds on it.
//
// # Reading
//
// Open takes a model folder, an index or one .safetensors file, and checks
// every header before it returns: it reads the 8-byte length and the header
// of each file (each allocation capped by MaxHeaderBytes and the file's
// size), never tensor data. A bad checkpoint is an *Error naming the file and
// the tensor, whose Err is one sentinel per kind of fault (ErrTruncated,
// ErrHeaderTooLarge, ErrBadHeader, ErrUnknownDType, ErrShapeMismatch,
// ErrOverlap, ErrHole, ErrDuplicateTensor, ErrBadIndex, ErrMissingShard,
// ErrIndexMismatch, ErrTotalSize, ...), never a panic. A Checkpoint lists
// its tensors (name, dtype, shape, file, offset, bytes) by shard then offset,
// looks them up by name, and gives each as an *io.SectionReader over the
// shard's descriptor (pread, so readers share no file position); it keeps
// one descriptor per file open until Close.
//
// The format's rules come from the safetensors README
// (github.com/huggingface/safetensors, "Format" and its notes) and its
// reference reader (safetensors/src/tensor.rs: MAX_HEADER_SIZE,
// read_metadata, Metadata::validate, the Dtype enum); the index's from
// transformers (modeling_utils.py's save_pretrained and from_pretrained,
// utils/hub.py's get_checkpoint_shard_files). Where the README says more
// than the reference reader checks, Open follows the README: the header
// must begin with '{', and no key may appear twice. Where the README is
// silent, Open follows the reference: unknown fields of a tensor entry are
// ignored, trailing JSON whitespace is allowed. Open also checks what no
// single-file reader can: no tensor in two shards, each shard holding
// exactly the tensors the index maps to it, total_size equal to the
// tensors' sum. Every dtype of the reference Dtype enum is known, the packed
// F4 and F6 ones included (a tensor of them must fill whole bytes).
//
// # Why not a library
//
// The header parser is written here rather than taken from
// github.com/nlpodyssey/safetensors (read at v0.0.0-20250209183917, its
// latest commit; it has no tagged release). That package parses only a
// whole file held in memory: ReadMetadata checks the buffer's length
// against the data area, so it needs every byte of a multi-gigabyte shard
// (or an mmap) just to read the header, and its validation is unexported.
// It knows none of the FP8 or MX dtypes, so DeepSeek-V3's F8_E4M3 weights
// and the F8_E8M0 scales of MX checkpoints would be refused; its errors are
// untyped strings, mostly without the tensor's name; it has no notion of a
// sharded index; and json.Unmarshal into its map keeps the last of two
// duplicate keys silently. Its checks (sorted contiguous offsets, shape ×
// dtype size) are reproduced here with the reference reader's overflow
// checks, in about as many lines as an adapter around it would take.
//
// The JSON syntax is checked by encoding/json (json.Valid); a small walker
// then reads the structure in one pass (json.go), which sees duplicate keys
// and matches field names exactly, and costs a few microseconds per tensor:
// BenchmarkOpen opens a 4-shard, 291-tensor index in under a millisecond.
//
// # Writing
//
// Write is the generator for tests and `arenactl gen-model`: it writes a
// checkpoint of the given tensors with deterministic pseudo-random contents
// (every float finite and weight-sized), sharded as transformers shards,
// streaming 1 MiB at a time, and returns a Manifest with the CRC-32C
// (NewHash) of every tensor, which Checkpoint.Checksum recomputes from the
// file.
//
// The package imports the standard library only.
package checkpoint
