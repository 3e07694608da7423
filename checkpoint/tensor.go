package checkpoint

import (
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// Tensor is one tensor of a checkpoint: where its bytes are and how to read
// them. The bytes are little-endian and row-major (C order), as the
// safetensors README says.
type Tensor struct {
	// Name is the tensor's key in its header
	// ("model.layers.0.self_attn.q_proj.weight").
	Name string
	// DType is the element type.
	DType DType
	// Shape is the dimensions, outermost first; empty for a scalar (rank 0).
	// A dimension may be 0 (an empty tensor: Bytes is 0).
	Shape []int64
	// File is the path of the file holding the bytes, as Open built it from
	// the path it was given.
	File string
	// Offset is the position of the first byte in File, in bytes from the
	// start of the file (8 + header length + the begin of data_offsets).
	Offset int64
	// Bytes is the length of the byte range: elements × DType.Bits() / 8.
	Bytes int64
}

// Elements is the product of Shape (1 for a scalar). Open checked it fits
// in int64.
func (t Tensor) Elements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Shard is one file of a checkpoint and what its header says besides the
// tensors.
type Shard struct {
	// Path is the file's path as Open built it.
	Path string
	// Size is the file's size in bytes when Open read it.
	Size int64
	// DataOffset is where the data area starts in the file: 8 + the header
	// length, in bytes. A tensor's Offset is DataOffset + its begin.
	DataOffset int64
	// Metadata is the header's __metadata__ map (nil when absent); the
	// Python writer puts {"format": "pt"} there.
	Metadata map[string]string
	// Tensors is how many tensors the file holds.
	Tensors int
}

// tensorBytes is the length of the byte range a tensor of dtype d and shape
// must have, checked the way the reference reader's Metadata::validate
// does: the element count and the bit count must not overflow, and the bits
// must fill whole bytes. It also keeps every dimension and the byte count
// below 2^63, so they fit Tensor's int64 fields. ok is false with reason set
// otherwise.
func tensorBytes(d DType, shape []uint64) (n uint64, reason string, ok bool) {
	elems := uint64(1)
	for i, dim := range shape {
		if dim > math.MaxInt64 {
			return 0, "shape[" + strconv.Itoa(i) + "] = " + strconv.FormatUint(dim, 10) + " is more than 2^63-1", false
		}
		hi, lo := bits.Mul64(elems, dim)
		if hi != 0 {
			return 0, "shape " + formatShape(shape) + " has more than 2^64 elements", false
		}
		elems = lo
	}
	hi, nbits := bits.Mul64(elems, uint64(d.Bits()))
	if hi != 0 {
		return 0, "shape " + formatShape(shape) + " of " + d.String() + " is more than 2^64 bits", false
	}
	if nbits%8 != 0 {
		return 0, "shape " + formatShape(shape) + " of " + d.String() + " is " + strconv.FormatUint(nbits, 10) +
			" bits, not whole bytes: a packed dtype's tensor must end on a byte boundary", false
	}
	n = nbits / 8
	if n > math.MaxInt64 {
		return 0, "shape " + formatShape(shape) + " of " + d.String() + " is more than 2^63-1 bytes", false
	}
	return n, "", true
}

// formatShape writes a shape as "[4096, 128]", cut to a bounded length.
func formatShape[T int64 | uint64](shape []T) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range shape {
		if i > 0 {
			b.WriteString(", ")
		}
		if b.Len() > maxEchoBytes {
			b.WriteString("… (" + strconv.Itoa(len(shape)) + " dimensions)")
			break
		}
		switch d := any(d).(type) {
		case int64:
			b.WriteString(strconv.FormatInt(d, 10))
		case uint64:
			b.WriteString(strconv.FormatUint(d, 10))
		}
	}
	b.WriteByte(']')
	return b.String()
}
