//go:build cuda

package gpuworker

// #include <cuda.h>
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/gpuarena/gpuarena/device"
)

// gorgonia.org/cu v0.9.6 wraps neither cuMemHostRegister nor
// cuMemHostUnregister, so this file calls those two functions itself;
// everything else goes through cu.

var _ StagingUploader = (*cudaBackend)(nil)

// hostRegistration is one page-locked staging buffer (memory the caller
// owns, registered with cuMemHostRegister) and the event that marks the end
// of the copies started from it.
type hostRegistration struct {
	mem    unsafe.Pointer
	bytes  int64
	done   cu.Event
	marked bool
}

// contains reports whether [p, p+n) lies inside the buffer.
func (s *hostRegistration) contains(p unsafe.Pointer, n int64) bool {
	base, at := uintptr(s.mem), uintptr(p)
	return at >= base && n >= 0 && int64(at-base) <= s.bytes-n
}

// overlaps reports whether [p, p+n) shares a byte with the buffer.
func (s *hostRegistration) overlaps(p unsafe.Pointer, n int64) bool {
	base, at := uintptr(s.mem), uintptr(p)
	return at < base+uintptr(s.bytes) && base < at+uintptr(n)
}

// RegisterStaging page-locks buf (cuMemHostRegister, no flags: cached,
// mapped into this context only) and makes an event for it; the first call
// also creates the upload stream (cuStreamCreate, CU_STREAM_NON_BLOCKING),
// which Close destroys. The driver locks pages that do not exist yet by
// faulting them in, on this thread: about 3 GB/s on the H200 host of
// docs/gpu-validation.md, 1.4 ms for an untouched 4 MiB buffer, which is
// why the loader's readers touch every page first.
func (b *cudaBackend) RegisterStaging(buf []byte) error {
	if err := b.checkOpen("register staging"); err != nil {
		return err
	}
	if len(buf) == 0 {
		return fmt.Errorf("register staging: %w: empty buffer; size must be > 0", ErrInvalidValue)
	}
	p, n := unsafe.Pointer(&buf[0]), int64(len(buf))
	for _, s := range b.staging {
		if s.overlaps(p, n) {
			return fmt.Errorf("register staging (%d B at %p): %w: it overlaps the staging buffer of %d B at %p, registered already", n, p, ErrInvalidValue, s.bytes, s.mem)
		}
	}
	if b.staging == nil {
		s, err := cu.MakeStream(cu.NonBlocking)
		if err != nil {
			return cudaErr("cuStreamCreate(upload stream)", err)
		}
		b.upload, b.staging = s, map[uintptr]*hostRegistration{}
	}
	ev, err := cu.MakeEvent(cu.DisableTiming)
	if err != nil {
		return cudaErr("cuEventCreate(staging buffer)", err)
	}
	if r := C.cuMemHostRegister(p, C.size_t(n), 0); r != C.CUDA_SUCCESS {
		_ = cu.DestroyEvent(&ev)
		return hostRegisterErr(n, r)
	}
	b.staging[uintptr(p)] = &hostRegistration{mem: p, bytes: n, done: ev}
	return nil
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
func (b *cudaBackend) lookupStaging(op string, buf []byte) (*hostRegistration, error) {
	if len(buf) > 0 {
		if s := b.staging[uintptr(unsafe.Pointer(&buf[0]))]; s != nil && s.bytes == int64(len(buf)) {
			return s, nil
		}
	}
	return nil, fmt.Errorf("%s: %w: not a registered staging buffer of this backend (%d B)", op, ErrNotAllocated, len(buf))
}

// UnregisterStaging waits for the copies from buf (cuEventSynchronize), then
// destroys its event and unlocks it (cuMemHostUnregister).
func (b *cudaBackend) UnregisterStaging(buf []byte) error {
	if err := b.checkOpen("unregister staging"); err != nil {
		return err
	}
	s, err := b.lookupStaging("unregister staging", buf)
	if err != nil {
		return err
	}
	delete(b.staging, uintptr(s.mem))
	return s.release()
}

// release waits for the buffer's copies and unlocks it, going on after a
// failure; the errors are returned joined.
func (s *hostRegistration) release() error {
	var errs []error
	if s.marked {
		if err := s.done.Synchronize(); err != nil {
			errs = append(errs, cudaErr("cuEventSynchronize(staging buffer)", err))
		}
	}
	if err := cu.DestroyEvent(&s.done); err != nil {
		errs = append(errs, cudaErr("cuEventDestroy(staging buffer)", err))
	}
	if r := C.cuMemHostUnregister(s.mem); r != C.CUDA_SUCCESS {
		errs = append(errs, fmt.Errorf("cuMemHostUnregister(%d B at %p): %w (CUresult %d)", s.bytes, s.mem, ErrDriver, int(r)))
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
		return fmt.Errorf("%s: %w: the source is not inside a registered staging buffer", op(), ErrInvalidValue)
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

// closeStaging unlocks every staging buffer still registered (their memory
// is their owners' to unmap) and destroys the upload stream, going on after
// a failure.
func (b *cudaBackend) closeStaging() error {
	if b.staging == nil {
		return nil
	}
	var errs []error
	for p, s := range b.staging {
		delete(b.staging, p)
		errs = append(errs, s.release())
	}
	if err := b.upload.Destroy(); err != nil {
		errs = append(errs, cudaErr("cuStreamDestroy(upload stream)", err))
	}
	b.staging = nil
	return errors.Join(errs...)
}
