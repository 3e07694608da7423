package checkpoint

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The sentinels every *Error wraps, one per kind of fault. Test with
// errors.Is; the *Error says which file and tensor, and what was found.
var (
	// ErrNoCheckpoint: the path does not exist, or is a folder holding
	// neither model.safetensors nor model.safetensors.index.json.
	ErrNoCheckpoint = errors.New("checkpoint: no checkpoint at path")
	// ErrNotRegularFile: a checkpoint file (or a shard the index names) is a
	// directory, named pipe, device or socket. It is refused before a byte is
	// read, so a FIFO never blocks Open and /dev/zero is never read.
	ErrNotRegularFile = errors.New("checkpoint: not a regular file")
	// ErrRead: the operating system failed a read of a header or an index
	// (the *Error's Cause is its error).
	ErrRead = errors.New("checkpoint: read failed")
	// ErrTruncated: a file shorter than its 8-byte header length, shorter
	// than the header that length announces, or whose data area ends before
	// a tensor's bytes do.
	ErrTruncated = errors.New("checkpoint: truncated file")
	// ErrHeaderTooLarge: the header length is more than MaxHeaderBytes, the
	// cap the safetensors reference reader sets (MAX_HEADER_SIZE).
	ErrHeaderTooLarge = errors.New("checkpoint: header too large")
	// ErrBadHeader: a header that is not UTF-8, does not begin with '{', is
	// not JSON, or is JSON of the wrong shape (a tensor entry without dtype,
	// shape or data_offsets, a number that is not a non-negative integer, an
	// end offset before its begin, a __metadata__ value that is not a string,
	// a duplicate key, bytes after the JSON object other than whitespace).
	ErrBadHeader = errors.New("checkpoint: malformed header")
	// ErrUnknownDType: a tensor's dtype is not one of the DType constants.
	ErrUnknownDType = errors.New("checkpoint: unknown dtype")
	// ErrShapeMismatch: a tensor's shape × dtype size differs from the length
	// of its byte range, overflows 64 bits, or (packed F4/F6) does not fill
	// whole bytes.
	ErrShapeMismatch = errors.New("checkpoint: shape and byte range disagree")
	// ErrOverlap: two tensors of one file share bytes.
	ErrOverlap = errors.New("checkpoint: overlapping tensors")
	// ErrHole: bytes of a data area that belong to no tensor, between two
	// tensors or after the last. The spec forbids them: "the byte buffer
	// needs to be entirely indexed, and cannot contain holes".
	ErrHole = errors.New("checkpoint: hole in the data area")
	// ErrDuplicateTensor: a tensor name twice in one header, in two shards,
	// or twice in an index's weight_map.
	ErrDuplicateTensor = errors.New("checkpoint: duplicate tensor")
	// ErrBadIndex: a model.safetensors.index.json that is not JSON, has no
	// weight_map (or an empty one), names a shard outside its folder, has
	// more than MaxShards shards, is more than MaxIndexBytes, or whose
	// metadata.total_size is not a non-negative integer.
	ErrBadIndex = errors.New("checkpoint: malformed index")
	// ErrMissingShard: a shard the index names is not there.
	ErrMissingShard = errors.New("checkpoint: missing shard")
	// ErrIndexMismatch: the index and the shards' headers disagree: a tensor
	// the index maps to a shard is not in that shard, or a shard holds a
	// tensor the index does not map to it.
	ErrIndexMismatch = errors.New("checkpoint: index and shards disagree")
	// ErrTotalSize: the index's metadata.total_size differs from the sum of
	// the shards' tensor bytes.
	ErrTotalSize = errors.New("checkpoint: total_size mismatch")
	// ErrUnknownTensor: Section or Checksum was asked for a name the
	// checkpoint does not hold.
	ErrUnknownTensor = errors.New("checkpoint: no such tensor")
	// ErrClosed: the Checkpoint was used after Close.
	ErrClosed = errors.New("checkpoint: closed")
	// ErrBadSpec: Write was given a TensorSpec it cannot write (an empty or
	// reserved name, a name that is not UTF-8, a negative dimension) or
	// options it cannot honour (a negative ShardBytes).
	ErrBadSpec = errors.New("checkpoint: bad tensor spec")
	// ErrExists: Write's folder already holds a checkpoint, which Write
	// does not overwrite.
	ErrExists = errors.New("checkpoint: checkpoint already exists")
	// ErrWrite: the operating system failed a write, rename or create of
	// Write (the *Error's Cause is its error).
	ErrWrite = errors.New("checkpoint: write failed")
)

// Error is every error this package returns: the file and the tensor at
// fault, what was found there, and the sentinel of its kind.
type Error struct {
	// File is the path of the file at fault as Open or Write built it (a
	// shard, the index, a missing shard's expected path, the folder).
	File string
	// Tensor is the tensor's name when one is at fault, "" when the fault is
	// the file's (a truncated 8-byte prefix, a header that is not JSON, a
	// missing folder).
	Tensor string
	// Reason says what was found, where, and what to do about it. Input it
	// quotes is cut to a bounded length.
	Reason string
	// Err is the sentinel of the fault's kind (ErrTruncated, ErrOverlap, ...).
	Err error
	// Cause is the underlying error (an *fs.PathError, a *json.SyntaxError),
	// or nil.
	Cause error
}

// maxEchoBytes bounds the input an Error's message quotes (a tensor name, a
// JSON value), so a hostile header cannot make a megabyte error message.
const maxEchoBytes = 256

// Error is `checkpoint: FILE: tensor "NAME": REASON[: CAUSE]`; the tensor
// part is left out when Tensor is empty.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("checkpoint: ")
	b.WriteString(e.File)
	if e.Tensor != "" {
		b.WriteString(": tensor ")
		b.WriteString(quote(e.Tensor))
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	if e.Cause != nil {
		b.WriteString(": ")
		b.WriteString(cut(e.Cause.Error()))
	}
	return b.String()
}

// Unwrap returns Err and, when set, Cause, so errors.Is matches both the
// sentinel and the underlying error (fs.ErrNotExist for a missing shard).
func (e *Error) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Err, e.Cause}
	}
	return []error{e.Err}
}

// fail builds an *Error of kind err.
func fail(err error, file, tensor, reason string) *Error {
	return &Error{File: file, Tensor: tensor, Reason: reason, Err: err}
}

// failCause builds an *Error of kind err with an underlying cause.
func failCause(err error, file, tensor, reason string, cause error) *Error {
	return &Error{File: file, Tensor: tensor, Reason: reason, Err: err, Cause: cause}
}

// cut returns s whole when it is at most maxEchoBytes, else its first
// maxEchoBytes bytes (whole runes) followed by "… (N bytes)".
func cut(s string) string {
	if len(s) <= maxEchoBytes {
		return s
	}
	n := maxEchoBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// quote is strconv.Quote of cut(s).
func quote(s string) string {
	return strconv.Quote(cut(s))
}
