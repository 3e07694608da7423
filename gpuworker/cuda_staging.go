//go:build cuda

package gpuworker

// #include <cuda.h>
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
	"gorgonia.org/cu"

	"github.com/gpuarena/gpuarena/device"
)

// gorgonia.org/cu v0.9.6 wraps neither cuMemHostRegister nor
// cuMemHostUnregister, so this file calls those two functions itself;
// everything else goes through cu.

var _ StagingUploader = (*cudaBackend)(nil)

// stagingBuf is one page-locked staging buffer and the event that marks the
// end of the copies started from it.
type stagingBuf struct {
	mem    unsafe.Pointer
	bytes  int64
	done   cu.Event
	marked bool
}

// allocPinned returns bytes of page-locked host memory: an anonymous
// private mapping, with transparent huge pages asked for (madvise
// MADV_HUGEPAGE: advice, 4 KiB pages without it), page-locked and mapped
// for the device by cuMemHostRegister (no flags). On the H200 host of
// docs/gpu-validation.md a 16 GB load's setup, its 18 staging buffers of 4
// MiB most of it, took 26 ms this way and 55 ms with cuMemHostAlloc.
func allocPinned(bytes int64) (unsafe.Pointer, error) {
	mem, err := unix.Mmap(-1, 0, int(bytes), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("mmap(%d B) for a staging buffer: %w: %w", bytes, ErrOutOfMemory, err)
	}
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE) // advice: the buffer works without it
	p := unsafe.Pointer(&mem[0])
	if r := C.cuMemHostRegister(p, C.size_t(bytes), 0); r != C.CUDA_SUCCESS {
		_ = unix.Munmap(mem)
		return nil, hostRegisterErr(bytes, r)
	}
	return p, nil
}

// freePinned unlocks and unmaps allocPinned's memory, going on after a
// failure.
func freePinned(p unsafe.Pointer, bytes int64) error {
	var errs []error
	if r := C.cuMemHostUnregister(p); r != C.CUDA_SUCCESS {
		errs = append(errs, fmt.Errorf("cuMemHostUnregister(%d B): %w (CUresult %d)", bytes, ErrDriver, int(r)))
	}
	if err := unix.Munmap(unsafe.Slice((*byte)(p), bytes)); err != nil {
		errs = append(errs, fmt.Errorf("munmap(%d B) of a staging buffer: %w", bytes, err))
	}
	return errors.Join(errs...)
}

// contains reports whether [p, p+n) lies inside the buffer.
func (s *stagingBuf) contains(p unsafe.Pointer, n int64) bool {
	base, at := uintptr(s.mem), uintptr(p)
	return at >= base && n >= 0 && int64(at-base) <= s.bytes-n
}

// AllocStaging allocates bytes of page-locked host memory (allocPinned:
// cached, mapped into this context only) and an event for it; the
// first call also creates the upload stream (cuStreamCreate,
// CU_STREAM_NON_BLOCKING), which Close destroys.
func (b *cudaBackend) AllocStaging(bytes int64) ([]byte, error) {
	if err := b.checkOpen("alloc staging"); err != nil {
		return nil, err
	}
	if bytes <= 0 {
		return nil, fmt.Errorf("alloc staging (%d B): %w: size must be > 0", bytes, ErrInvalidValue)
	}
	if b.staging == nil {
		s, err := cu.MakeStream(cu.NonBlocking)
		if err != nil {
			return nil, cudaErr("cuStreamCreate(upload stream)", err)
		}
		b.upload, b.staging = s, map[uintptr]*stagingBuf{}
	}
	ev, err := cu.MakeEvent(cu.DisableTiming)
	if err != nil {
		return nil, cudaErr("cuEventCreate(staging buffer)", err)
	}
	p, err := allocPinned(bytes)
	if err != nil {
		_ = cu.DestroyEvent(&ev)
		return nil, err
	}
	b.staging[uintptr(p)] = &stagingBuf{mem: p, bytes: bytes, done: ev}
	return unsafe.Slice((*byte)(p), bytes), nil
}

// hostRegisterErr translates cuMemHostRegister's result as cudaErr does.
func hostRegisterErr(bytes int64, r C.CUresult) error {
	op := fmt.Sprintf("cuMemHostRegister(%d B)", bytes)
	switch r {
	case C.CUDA_ERROR_OUT_OF_MEMORY:
		return cudaErr(op, cu.OutOfMemory)
	case C.CUDA_ERROR_INVALID_VALUE:
		return cudaErr(op, cu.InvalidValue)
	case C.CUDA_ERROR_INVALID_CONTEXT:
		return cudaErr(op, cu.InvalidContext)
	}
	return fmt.Errorf("%s: %w (CUresult %d)", op, ErrDriver, int(r))
}

// lookupStaging finds the staging buffer buf is the whole of.
func (b *cudaBackend) lookupStaging(op string, buf []byte) (*stagingBuf, error) {
	if len(buf) > 0 {
		if s := b.staging[uintptr(unsafe.Pointer(&buf[0]))]; s != nil && s.bytes == int64(len(buf)) {
			return s, nil
		}
	}
	return nil, fmt.Errorf("%s: %w: not a staging buffer of this backend (%d B)", op, ErrNotAllocated, len(buf))
}

// FreeStaging waits for the copies from buf (cuEventSynchronize), then frees
// its event and memory (cuEventDestroy, freePinned).
func (b *cudaBackend) FreeStaging(buf []byte) error {
	if err := b.checkOpen("free staging"); err != nil {
		return err
	}
	s, err := b.lookupStaging("free staging", buf)
	if err != nil {
		return err
	}
	delete(b.staging, uintptr(s.mem))
	return b.freeStaging(s)
}

// freeStaging waits for the buffer's copies and frees it, going on after a
// failure; the first error is returned.
func (b *cudaBackend) freeStaging(s *stagingBuf) error {
	var errs []error
	if s.marked {
		if err := s.done.Synchronize(); err != nil {
			errs = append(errs, cudaErr("cuEventSynchronize(staging buffer)", err))
		}
	}
	if err := cu.DestroyEvent(&s.done); err != nil {
		errs = append(errs, cudaErr("cuEventDestroy(staging buffer)", err))
	}
	if err := freePinned(s.mem, s.bytes); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// CopyHtoDAsync starts copying src to dst on the upload stream
// (cuMemcpyHtoDAsync). An empty src is a no-op.
func (b *cudaBackend) CopyHtoDAsync(dst device.DevicePtr, src []byte) error {
	if err := b.checkOpen("copy host→device async"); err != nil {
		return err
	}
	op := func() string { return fmt.Sprintf("cuMemcpyHtoDAsync(%#x, %d B)", uint64(dst), len(src)) }
	if err := checkSpan(op, dst, int64(len(src))); err != nil || len(src) == 0 {
		return err
	}
	p := unsafe.Pointer(&src[0])
	inside := false
	for _, s := range b.staging {
		if s.contains(p, int64(len(src))) {
			inside = true
			break
		}
	}
	if !inside {
		return fmt.Errorf("%s: %w: the source is not inside a staging buffer", op(), ErrInvalidValue)
	}
	if err := cu.MemcpyHtoDAsync(cu.DevicePtr(dst), p, int64(len(src)), b.upload); err != nil {
		return cudaErr(op(), err)
	}
	return nil
}

// MarkStaging records buf's event on the upload stream (cuEventRecord).
func (b *cudaBackend) MarkStaging(buf []byte) error {
	if err := b.checkOpen("mark staging"); err != nil {
		return err
	}
	s, err := b.lookupStaging("mark staging", buf)
	if err != nil {
		return err
	}
	if err := s.done.Record(b.upload); err != nil {
		return cudaErr("cuEventRecord(staging buffer)", err)
	}
	s.marked = true
	return nil
}

// WaitStaging waits for buf's event (cuEventSynchronize).
func (b *cudaBackend) WaitStaging(buf []byte) error {
	if err := b.checkOpen("wait staging"); err != nil {
		return err
	}
	s, err := b.lookupStaging("wait staging", buf)
	if err != nil || !s.marked {
		return err
	}
	if err := s.done.Synchronize(); err != nil {
		return cudaErr("cuEventSynchronize(staging buffer)", err)
	}
	return nil
}

// closeStaging frees every staging buffer still held and the upload stream,
// going on after a failure.
func (b *cudaBackend) closeStaging() error {
	if b.staging == nil {
		return nil
	}
	var errs []error
	for p, s := range b.staging {
		delete(b.staging, p)
		errs = append(errs, b.freeStaging(s))
	}
	if err := b.upload.Destroy(); err != nil {
		errs = append(errs, cudaErr("cuStreamDestroy(upload stream)", err))
	}
	b.staging = nil
	return errors.Join(errs...)
}
