package gpuworker

import "github.com/gpuarena/gpuarena/device"

// Backend is the thing that really calls the device driver. A Backend is
// created, used and closed on the GPU actor's locked thread only; its methods
// are not safe for concurrent use.
//
// Implementations translate driver results into this package's sentinel
// errors at the boundary (ErrOutOfMemory, ErrInvalidValue, ErrNotAllocated,
// ...), so callers test them with errors.Is whatever the backend.
type Backend interface {
	// Info describes the device.
	Info() DeviceInfo
	// Alloc allocates bytes bytes (cuMemAlloc). bytes ≤ 0 gives ErrInvalidValue;
	// more than the device has free gives ErrOutOfMemory.
	Alloc(bytes int64) (device.DevicePtr, error)
	// Free frees an allocation made by Alloc (cuMemFree).
	Free(ptr device.DevicePtr) error
	// Memset sets bytes bytes at ptr to value (cuMemsetD8).
	Memset(ptr device.DevicePtr, value byte, bytes int64) error
	// CopyHtoD copies len(src) bytes of host memory to dst (cuMemcpyHtoD).
	CopyHtoD(dst device.DevicePtr, src []byte) error
	// CopyDtoH copies len(dst) bytes at src to host memory (cuMemcpyDtoH).
	CopyDtoH(dst []byte, src device.DevicePtr) error
	// CopyDtoD copies bytes bytes from src to dst (cuMemcpyDtoD).
	CopyDtoD(dst, src device.DevicePtr, bytes int64) error
	// MemInfo returns the device's free and total memory in bytes (cuMemGetInfo).
	MemInfo() (freeBytes, totalBytes int64, err error)
	// Close releases the backend (frees what it still holds, releases the
	// CUDA primary context). Further calls are undefined.
	Close() error
}

// ThreadBinder is implemented by backends whose calls need per-thread state,
// such as a CUDA context current on the calling thread. When a forward step
// (or the backend itself) ends the GPU thread with runtime.Goexit, a fresh
// locked thread takes over, and BindThread runs on it before any other call
// reaches the backend: the cuda backend makes its primary context current
// there (cuCtxSetCurrent). An error makes the GPU worker fatal.
type ThreadBinder interface {
	BindThread() error
}

// BytesInUseReporter is implemented by backends that can tell how many bytes
// they have allocated (hostsim). The GPU actor reports it beside the ledger
// so tests can check that the two agree.
type BytesInUseReporter interface {
	BytesInUse() int64
}

// DeviceInfo describes one device.
type DeviceInfo struct {
	// Backend is the name the backend registered under (Register):
	// KindHostSim, KindCUDA, or another built in.
	Backend string `json:"backend"`
	// Ordinal is the device index (CUDA device ordinal; 0 for hostsim).
	Ordinal int `json:"ordinal"`
	// Name is the device's marketing name ("NVIDIA H200").
	Name string `json:"name"`
	// TotalBytes is the device's memory in bytes.
	TotalBytes int64 `json:"total_bytes"`
	// ComputeMajor and ComputeMinor are the compute capability (9.0 for Hopper).
	ComputeMajor int `json:"compute_major"`
	ComputeMinor int `json:"compute_minor"`
}

// BackendFactory makes a Backend. The GPU actor calls it once, on its locked
// thread, when it starts; for cuda this is where the primary context is
// retained and made current.
type BackendFactory func() (Backend, error)

// StagingUploader is implemented by backends that copy host memory to the
// device asynchronously from page-locked staging buffers; the weights
// loader (Worker.LoadWeights) uses it when the backend has it, and copies
// synchronously otherwise. The loader owns the staging memory (an
// anonymous mapping, its pages touched by the loader's readers) and asks
// the backend to page-lock it buffer by buffer and to unlock it when its
// copies are done. The cuda backend implements it with cuMemHostRegister,
// cuMemcpyHtoDAsync on a non-blocking stream of its own and one event per
// buffer. Like every Backend method, these run on the GPU actor's thread.
type StagingUploader interface {
	// RegisterStaging page-locks buf for asynchronous copies
	// (cuMemHostRegister, no flags). buf must be host memory outside the
	// Go heap (the driver keeps its address), must not overlap a buffer
	// registered already, and must stay mapped until UnregisterStaging(buf)
	// or Close returns; its pages should exist already, since locking
	// faults in those that do not, on the GPU thread. Errors:
	// ErrInvalidValue for an empty buf or an overlap; ErrOutOfMemory when
	// the host cannot lock that much; ErrDriver otherwise. On an error
	// nothing is registered.
	RegisterStaging(buf []byte) error
	// UnregisterStaging waits for the copies from buf to finish and unlocks
	// it (cuEventSynchronize, cuMemHostUnregister); the memory stays the
	// caller's, to unmap. buf must be a whole slice RegisterStaging took;
	// another gives ErrNotAllocated. It unlocks buf even when the wait
	// fails, and returns the errors joined.
	UnregisterStaging(buf []byte) error
	// CopyHtoDAsync starts copying src, a part of a registered buffer, to
	// dst and returns before the copy is done (cuMemcpyHtoDAsync). src must
	// lie inside one registered buffer (else ErrInvalidValue) and must not
	// be written until WaitStaging of that buffer returns.
	CopyHtoDAsync(dst device.DevicePtr, src []byte) error
	// MarkStaging records that the copies started from buf so far are the
	// ones WaitStaging(buf) waits for (cuEventRecord on the stream).
	// Errors: ErrNotAllocated for a buf RegisterStaging did not take whole.
	MarkStaging(buf []byte) error
	// WaitStaging blocks until the copies MarkStaging(buf) recorded are
	// done (cuEventSynchronize). A buffer never marked returns at once.
	// Errors: ErrNotAllocated as MarkStaging; the driver's, such as a copy
	// that failed.
	WaitStaging(buf []byte) error
}
