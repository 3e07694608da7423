package gpuworker

import (
	"time"

	"github.com/gpuarena/gpuarena/device"
)

// Compute is implemented by backends that run kernels: hostsim (Go
// kernels registered by name, KernelRegistry) and cuda. The GPU actor
// finds it by type assertion, as it does ThreadBinder, and every method
// runs on the GPU actor's thread. Work runs on one stream of the
// backend's, the step stream, created on that thread when first needed;
// on cuda it is a blocking stream (CU_STREAM_DEFAULT), so the synchronous
// memsets and copies of Backend, which run on the legacy default stream,
// are ordered with it.
//
// Handles are the backend's own small integers; the actor hands out
// device.Function values and events that name them, and checks them before
// they reach the backend. Errors are translated at the boundary: a refused
// image is ErrBadModule, a missing kernel ErrNoFunction, a refused launch
// ErrLaunchConfig, and a kernel that faulted ErrDeviceFault, which the
// backend keeps returning from then on (the context is unusable).
//
// WithFaults forwards Compute unchanged: a fault plan covers the memory
// calls, and a step's kernels run on the wrapped backend as they would
// without it.
type Compute interface {
	// LoadModule loads image, of format "ptx" or "cubin" (cuModuleLoadData),
	// and looks up the kernels named (cuModuleGetFunction). It returns the
	// module and, per name, a kernel or the reason it cannot run it
	// (wrapping ErrNoFunction). Errors: ErrBadModule wrapped with the
	// driver's (or JIT compiler's) message.
	LoadModule(image []byte, format string, names []string) (ModuleHandle, []KernelHandle, []error, error)
	// UnloadModule unloads a module and its kernels (cuModuleUnload).
	UnloadModule(m ModuleHandle) error
	// Launch launches k on the step stream with cfg (normalized: no zero
	// dimension) and one 8-byte word per parameter (cuLaunchKernel), and
	// returns without waiting. When exact is false the kernel's parameter
	// count is unknown (a cubin): the backend passes enough zero words
	// after args that the driver never reads past them.
	Launch(k KernelHandle, cfg device.LaunchConfig, args []uint64, exact bool) error
	// StreamCopyHtoD and StreamCopyDtoH copy on the step stream
	// (cuMemcpyHtoDAsync, cuMemcpyDtoHAsync); from and to Go memory the
	// driver is done with the host bytes when they return.
	StreamCopyHtoD(dst device.DevicePtr, src []byte) error
	StreamCopyDtoH(dst []byte, src device.DevicePtr) error
	// NewEvent makes an event (cuEventCreate, with timing); RecordEvent
	// records it on the step stream (cuEventRecord); EventElapsed waits for
	// end and returns the time from start to end (cuEventSynchronize,
	// cuEventElapsedTime).
	NewEvent() (EventHandle, error)
	RecordEvent(e EventHandle) error
	EventElapsed(start, end EventHandle) (time.Duration, error)
	// Synchronize waits for the step stream (cuStreamSynchronize) and
	// returns the first error of its work.
	Synchronize() error

	// BeginCapture puts the step stream in capture mode
	// (cuStreamBeginCapture, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL): the
	// launches that follow are recorded into a graph instead of run, until
	// EndCapture. The GPU actor lets nothing but Launch reach the backend
	// in between.
	BeginCapture() error
	// EndCapture ends the capture (cuStreamEndCapture). With keep it
	// instantiates the captured graph (cuGraphInstantiateWithFlags) and
	// returns its handle; without, it drops what was captured and returns
	// the first error of ending it. Either way the stream is out of
	// capture mode when it returns. Errors: ErrNotCapturable (the driver
	// invalidated the capture), the driver's.
	EndCapture(keep bool) (GraphHandle, error)
	// LaunchGraph replays a graph on the step stream (cuGraphLaunch) and
	// returns without waiting.
	LaunchGraph(g GraphHandle) error
	// DestroyGraph frees an instantiated graph (cuGraphExecDestroy).
	DestroyGraph(g GraphHandle) error
}

// ModuleHandle, KernelHandle, EventHandle and GraphHandle are a Compute
// backend's own names for a loaded module, one of its kernels, an event
// and an instantiated graph.
type (
	ModuleHandle int
	KernelHandle int
	EventHandle  int
	GraphHandle  int
)

// MaxLaunchArgs is the most arguments a launch passes (kernel parameters
// of at most 8 bytes each).
const MaxLaunchArgs = 64

// MaxStepEvents is the most events one forward step may record.
const MaxStepEvents = 4096

// threadChecker is implemented by backends that can tell, more cheaply
// than a gettid system call, whether the caller runs on the GPU thread
// (cuda: pthread_self, in a cgo call the launch path makes anyway). The
// step's device handle uses it for its thread check when the backend has
// it.
type threadChecker interface {
	onGPUThread() bool
}
