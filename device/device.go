package device

import "time"

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
//
// Compute: a step launches kernels of the modules the manager loaded
// (Launch) or replays a captured graph of them (LaunchGraph), copies
// asynchronously (CopyHtoDAsync, CopyDtoHAsync) and times its work with
// events (RecordEvent, Elapsed), all on one stream the manager owns, the
// step's stream. Memset and the synchronous copies are
// ordered with it: each waits for the work launched before it, and work
// launched after it waits for it (the stream is a blocking one, which
// CUDA's legacy default stream, where they run, synchronises with). When
// the step returns, the manager waits for its stream (so Forward returns
// with the step's work done and any fault reported) unless the step called
// LeaveInFlight. A kernel's own accesses are not checked against the
// ledger: a bad pointer argument faults the device (gpuworker.ErrDeviceFault,
// fatal to the manager on cuda and on the simulated device alike).
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

	// Launch launches fn on the step's stream with cfg and one 8-byte word
	// per kernel parameter (PtrArg, U32Arg, F32Arg, ...), and returns
	// without waiting for it (cuLaunchKernel). Reusing one args slice
	// across launches makes a launch allocate nothing. Errors: a
	// *KernelError naming the module and function, with ErrNoModule (fn's
	// module was unloaded), ErrLaunchConfig (the device refused cfg, or
	// len(args) is not the kernel's parameter count), or
	// gpuworker.ErrDeviceFault (the context is faulted).
	Launch(fn Function, cfg LaunchConfig, args ...uint64) error
	// CopyHtoDAsync copies len(src) bytes to dst on the step's stream
	// (cuMemcpyHtoDAsync), after the work launched before it. From Go
	// memory the driver reads src before it returns (through its own
	// staging buffer), so src may be reused at once.
	CopyHtoDAsync(dst DevicePtr, src []byte) error
	// CopyDtoHAsync copies len(dst) bytes at src to dst on the step's
	// stream (cuMemcpyDtoHAsync), after the work launched before it. Into
	// Go memory the driver returns once dst is written.
	CopyDtoHAsync(dst []byte, src DevicePtr) error
	// RecordEvent records an event on the step's stream (cuEventRecord):
	// it completes when the work launched before it has. Events belong to
	// the step and end with it.
	RecordEvent() (Event, error)
	// Elapsed waits for end to complete and returns the device time from
	// start to end (cuEventElapsedTime; about 0.5 µs resolution on CUDA,
	// the host's clock on the simulated device, which runs kernels as they
	// are launched). Errors: gpuworker.ErrInvalidValue for an event not
	// recorded in this step.
	Elapsed(start, end Event) (time.Duration, error)
	// Synchronize waits until the step's stream has done all the work
	// launched on it (cuStreamSynchronize) and returns the first error it
	// met, such as gpuworker.ErrDeviceFault.
	Synchronize() error
	// LaunchGraph replays a captured graph on the step's stream as one
	// launch (cuGraphLaunch) and returns without waiting for it: its
	// kernels run in capture order, after the work launched before it and
	// before the work launched after it, with the arguments they were
	// captured with. Errors: a *GraphError naming the graph, with
	// ErrNoGraph (destroyed, or another manager's), ErrNoModule (a module
	// whose kernels it launches was unloaded), ErrNotCapturable (called
	// while a graph is captured) or gpuworker.ErrDeviceFault.
	LaunchGraph(g Graph) error
	// LeaveInFlight tells the manager not to wait for the step's stream
	// when the step returns: Forward returns while the work may still run.
	// The next forward step's work queues behind it on the same stream;
	// any other request (memset, copy, alloc, free, a module load, a
	// ledger snapshot, ...) first waits for it, and a fault in it is
	// reported there.
	LeaveInFlight()
}
