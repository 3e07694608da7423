package device

// DevicePtr is a device address (a CUdeviceptr on the cuda backend, an
// address in a private host mapping on hostsim). Zero is NULL: the pointer of
// a buffer that is not present.
type DevicePtr uint64

// Device is the handle a forward step gets to the device for the duration of
// the step. Its methods run on the GPU actor's thread and may only be called
// from inside the step function; every range is checked against the ledger
// (the whole range must lie inside one live allocation, and a range that
// starts in an arena buffer must end in it) before it reaches the backend.
// Sizes are in bytes. Errors: gpuworker.ErrOutOfRange,
// gpuworker.ErrNotAllocated, gpuworker.ErrNotGPUThread (called from a
// goroutine other than the step's), gpuworker.ErrStepOver (called after the
// step returned), and whatever the backend returns.
type Device interface {
	// Memset sets bytes bytes at ptr to value (cuMemsetD8).
	Memset(ptr DevicePtr, value byte, bytes int64) error
	// CopyHtoD copies len(src) bytes from host memory to dst (cuMemcpyHtoD).
	CopyHtoD(dst DevicePtr, src []byte) error
	// CopyDtoH copies len(dst) bytes from src to host memory (cuMemcpyDtoH).
	CopyDtoH(dst []byte, src DevicePtr) error
	// CopyDtoD copies bytes bytes from src to dst on the device
	// (cuMemcpyDtoD). Overlapping ranges are refused with
	// gpuworker.ErrInvalidValue: the driver's result for them is undefined.
	CopyDtoD(dst, src DevicePtr, bytes int64) error
}
