package gpuworker

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/gpuarena/gpuarena/internal/messages"
)

// hugePageBytes is the size of a transparent huge page on x86-64 (and on
// arm64 with 4 KiB pages): the staging mapping starts at a multiple of it,
// so that each 4 MiB staging buffer is two whole huge pages.
const hugePageBytes = 2 << 20

// stagingBuffer is one host staging buffer of a weights load, a part of
// its stagingSet's mapping. Whoever holds it (a reader, the loading
// goroutine, a channel between them) may read and write it; the channels
// order those accesses.
type stagingBuffer struct {
	mem []byte
	// touched: a reader has written every page of it (touchPages), the
	// first time it took it.
	touched bool
	// asked: the loading goroutine has asked the GPU thread to page-lock
	// it (CopyHtoDStaged.Register, with its first copy).
	asked bool
	// pinned: the backend page-locked it, or may have (a request that
	// could not finish): it is unlocked before the mapping is unmapped.
	pinned bool
}

// memory is the buffer's bytes; nil for a nil buffer (CopyHtoDStaged's
// Wait when there is nothing to wait for).
func (b *stagingBuffer) memory() []byte {
	if b == nil {
		return nil
	}
	return b.mem
}

// stagingSet is a weights load's staging memory: one mapping (mapStaging)
// cut into buffers of the chunk's size, each starting on a page of its own.
type stagingSet struct {
	mem  []byte
	bufs []*stagingBuffer
}

// roundUp is n rounded up to a multiple of m (> 0).
func roundUp[T int64 | uintptr](n, m T) T { return (n + m - 1) / m * m }

// newStagingSet maps count staging buffers of bytes each (mapStaging: no
// page backed yet, huge pages asked for). Errors: ErrInvalidValue for a
// count or size ≤ 0; mapStaging's.
func newStagingSet(count int, bytes int64) (*stagingSet, error) {
	if count <= 0 || bytes <= 0 {
		return nil, fmt.Errorf("staging buffers: %w: %d of %d B; both must be > 0", ErrInvalidValue, count, bytes)
	}
	// Each buffer starts on a page of its own: the driver locks pages
	// whole, and two registrations sharing one would overlap.
	stride := roundUp(bytes, int64(os.Getpagesize()))
	mem, err := mapStaging(int64(count) * stride)
	if err != nil {
		return nil, fmt.Errorf("staging buffers (%d of %d B): %w", count, bytes, err)
	}
	s := &stagingSet{mem: mem, bufs: make([]*stagingBuffer, count)}
	for i := range s.bufs {
		at := int64(i) * stride
		s.bufs[i] = &stagingBuffer{mem: mem[at : at+bytes : at+bytes]}
	}
	return s, nil
}

// touchPages writes a zero into every page of buf, which must start on a
// page boundary: a page of anonymous memory is faulted in (allocated and
// zeroed by the kernel) when first written, so the GPU thread, which locks
// the buffer with its first copy, finds all its pages there (a chunk may
// not fill the buffer) instead of faulting them in itself. With
// transparent huge pages, the first write into each 2 MiB faults in all
// of it.
func touchPages(buf []byte, page int) {
	for i := 0; i < len(buf); i += page {
		buf[i] = 0
	}
}

// release unlocks every buffer that is or may be page-locked still, on the
// GPU thread (StagingUnregister, which waits for each one's copies first),
// and then unmaps the set. It must be called once, after the readers have
// exited. The request goes even when no buffer is locked: its reply also
// says that the GPU thread is done with every earlier request of the
// calling goroutine (the mailbox is first in, first out), such as a copy
// whose caller stopped waiting. Without that reply (the worker closed, an
// unlock failed) the memory is left mapped, since the GPU thread or the
// driver may still use it, and the error says so.
func (s *stagingSet) release(w *Worker) error {
	var pinned [][]byte
	for _, b := range s.bufs {
		if b.pinned {
			pinned = append(pinned, b.mem)
		}
	}
	r, err := stagingUnregisters.ask(context.Background(), w, messages.StagingUnregister{Buffers: pinned})
	if err = errors.Join(err, r); err != nil {
		return fmt.Errorf("release %d staging buffer(s) (%d page-locked): %w; their %d B of host memory are left mapped, since the GPU thread or the driver may still use them", len(s.bufs), len(pinned), err, len(s.mem))
	}
	if err := unmapStaging(s.mem); err != nil {
		return fmt.Errorf("release %d staging buffer(s): %w", len(s.bufs), err)
	}
	return nil
}
