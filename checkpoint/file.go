package checkpoint

import (
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"strconv"
)

// openRegular opens path for reading after checking it is a regular file,
// symlinks followed. A path that does not exist is an *Error of kind
// missing (ErrNoCheckpoint for the path Open was given, ErrMissingShard for
// a shard the index names) with tensor as its Tensor; a path that is not a
// regular file is ErrNotRegularFile, refused from its metadata before it is
// opened and again from the opened file's, so a FIFO never blocks.
func openRegular(path string, missing error, tensor, what string) (*os.File, int64, error) {
	info, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, 0, failCause(missing, path, tensor, what+" does not exist", err)
		}
		return nil, 0, failCause(ErrRead, path, tensor, "cannot stat "+what, err)
	}
	if !info.Mode().IsRegular() {
		return nil, 0, fail(ErrNotRegularFile, path, tensor, what+" is "+fileKind(info.Mode())+", not a regular file")
	}
	f, err := os.OpenFile(path, os.O_RDONLY|openNonBlock, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, 0, failCause(missing, path, tensor, what+" does not exist", err)
		}
		return nil, 0, failCause(ErrRead, path, tensor, "cannot open "+what, err)
	}
	info, err = f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, 0, failCause(ErrRead, path, tensor, "cannot stat "+what, err)
	}
	if !info.Mode().IsRegular() {
		_ = f.Close()
		return nil, 0, fail(ErrNotRegularFile, path, tensor, what+" is "+fileKind(info.Mode())+", not a regular file")
	}
	return f, info.Size(), nil
}

// fileKind names a non-regular file's kind for an error.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	default:
		return "not a regular file (mode " + m.String() + ")"
	}
}

// shardFile is one safetensors file, open and checked.
type shardFile struct {
	f       *os.File
	info    Shard
	tensors []headerTensor // sorted by offset
}

// readShard reads and checks the header of the safetensors file f of size
// bytes at path: the 8-byte length (ErrTruncated when the file is shorter;
// ErrHeaderTooLarge past MaxHeaderBytes; ErrTruncated when the header would
// end past the file), then the header itself (parseHeader), then the
// tensors' layout in the data area (checkLayout). It reads 8 + N bytes and
// nothing else, and allocates the N only after checking them against
// MaxHeaderBytes and the file's size.
func readShard(f *os.File, path string, size int64) (*shardFile, error) {
	if size < headerLenBytes {
		return nil, fail(ErrTruncated, path, "", "the file is "+strconv.FormatInt(size, 10)+
			" bytes, shorter than the 8-byte header length every safetensors file starts with")
	}
	var lenBuf [headerLenBytes]byte
	if _, err := f.ReadAt(lenBuf[:], 0); err != nil {
		return nil, readFailed(path, "the header length", err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > MaxHeaderBytes {
		return nil, fail(ErrHeaderTooLarge, path, "", "the header length is "+strconv.FormatUint(n, 10)+
			" bytes, more than the format's cap of "+strconv.Itoa(MaxHeaderBytes)+": this is not a safetensors file, or it is corrupt")
	}
	if int64(n) > size-headerLenBytes {
		return nil, fail(ErrTruncated, path, "", "the header length says "+strconv.FormatUint(n, 10)+
			" bytes but the file has "+strconv.FormatInt(size-headerLenBytes, 10)+" after the length: the file is cut short, or not a safetensors file")
	}
	header := make([]byte, n)
	if _, err := f.ReadAt(header, headerLenBytes); err != nil {
		return nil, readFailed(path, "the header", err)
	}
	h, err := parseHeader(path, header)
	if err != nil {
		return nil, err
	}
	dataOffset := headerLenBytes + int64(n)
	sorted, err := checkLayout(path, h.tensors, size-dataOffset)
	if err != nil {
		return nil, err
	}
	return &shardFile{
		f:       f,
		info:    Shard{Path: path, Size: size, DataOffset: dataOffset, Metadata: h.metadata, Tensors: len(sorted)},
		tensors: sorted,
	}, nil
}

// readFailed wraps a failed header read. A short read means the file
// shrank since its size was taken: ErrTruncated.
func readFailed(path, what string, err error) error {
	if errors.Is(err, io.EOF) {
		return failCause(ErrTruncated, path, "", "the file ended while reading "+what+" (did it shrink while being read?)", io.ErrUnexpectedEOF)
	}
	return failCause(ErrRead, path, "", "cannot read "+what, err)
}
