package gpuworker

import (
	"errors"
	"fmt"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
)

// Sentinel errors. Backends translate driver results into these at the
// boundary, and the GPU actor wraps them with the operation
// ("alloc hidden_states (33554432 B): out of device memory"), so callers test
// them with errors.Is whatever the backend.
var (
	// ErrOutOfMemory: the device (or the budget) cannot hold the request. The
	// GPU actor returns it inside an *OutOfMemoryError.
	ErrOutOfMemory = errors.New("out of device memory")
	// ErrInvalidValue: a size ≤ 0, a nil pointer, or another argument the
	// driver would refuse (CUDA_ERROR_INVALID_VALUE).
	ErrInvalidValue = errors.New("invalid value")
	// ErrNotAllocated: the pointer is not a live allocation (a double free, or
	// a pointer never returned by Alloc).
	ErrNotAllocated = errors.New("pointer is not a live allocation")
	// ErrNotOwner: the pointer is live but held by another owner.
	ErrNotOwner = errors.New("pointer is held by another owner")
	// ErrOutOfRange: a memset or copy runs past the end of the allocation it starts in.
	ErrOutOfRange = errors.New("range is outside the allocation")
	// ErrReentrant: a call that waits for the GPU actor made on the GPU
	// thread itself, from inside a forward step; it would wait forever. A step
	// may use only the Device it is given.
	ErrReentrant = errors.New("called from inside a forward step, on the GPU thread: a step may use only its Device")
	// ErrClosed: the GPU actor has stopped.
	ErrClosed = errors.New("gpu worker is closed")
	// ErrBackendPanic: the backend panicked; the GPU actor stops serving and
	// reports this for every later request.
	ErrBackendPanic = errors.New("backend panicked")
	// ErrActorPanic: a panic escaped the GPU actor's own code (not the
	// backend's, which is ErrBackendPanic). The actor is stopped, never
	// restarted: it frees what its ledger holds and closes the backend, and
	// every later request fails with ErrClosed joined with this error.
	ErrActorPanic = errors.New("gpu actor panicked")
	// ErrStepPanic: a forward step panicked. The panic is recovered on the GPU
	// thread (the error is a *StepPanicError with the panic's stack, which is
	// also logged at error level); the actor keeps serving.
	ErrStepPanic = errors.New("forward step panicked")
	// ErrTagPanic: an AllocBatch's tag function panicked. The panic is
	// recovered on the GPU thread, the batch rolled back; the actor keeps
	// serving.
	ErrTagPanic = errors.New("alloc batch tag function panicked")
	// ErrStepExited: a forward step ended its goroutine with runtime.Goexit
	// (t.FailNow, require.* or log.Fatal's cousins inside a step). The step's
	// caller gets this error; the GPU actor keeps serving on a fresh locked OS
	// thread with the backend's context made current there, and its ledger
	// intact.
	ErrStepExited = errors.New("forward step called runtime.Goexit")
	// ErrStepOver: a forward step's device handle used after the step returned.
	ErrStepOver = errors.New("device handle used after its forward step returned")
	// ErrNotGPUThread: a forward step's device handle used from a goroutine
	// other than the step's own, which runs on the GPU thread (design.md §1:
	// on cuda, another thread has no current context). Hand the work back to
	// the step's goroutine instead.
	ErrNotGPUThread = errors.New("device handle used off the GPU thread: only the forward step's own goroutine may use it")
	// ErrBackendNotBuiltIn: the configured backend is not registered in this
	// binary (a backend behind a build tag, such as cuda, in a build without
	// the tag). The error is a *BackendNotBuiltInError naming it and the
	// backends built in.
	ErrBackendNotBuiltIn = errors.New("gpu backend not built in")
	// ErrNoDevice: the asked device ordinal does not exist.
	ErrNoDevice = errors.New("no such device")
	// ErrDriver: any other driver failure.
	ErrDriver = errors.New("driver error")
	// ErrInjected: a failure injected by a fault plan (WithFaults), other
	// than out of memory.
	ErrInjected = errors.New("injected fault")
	// ErrDeviceFault: a kernel faulted (an illegal or misaligned address,
	// an illegal instruction, a trap: CUDA_ERROR_ILLEGAL_ADDRESS and the
	// other sticky errors), which leaves the CUDA context unusable. The
	// step gets it, the worker turns fatal (Worker.Err returns it, every
	// later request gets it), and Stop and Close still return; the memory
	// the ledger held goes with the context when the backend closes. The
	// simulated device reports a Go kernel's access outside its allocation
	// the same way.
	ErrDeviceFault = errors.New("device fault: a kernel faulted and the context is unusable")

	// ErrNoCompute: a module load or a launch on a backend that runs no
	// kernels (it does not implement Compute).
	ErrNoCompute = errors.New("the backend runs no kernels")

	// ErrBadModule, ErrNoFunction, ErrNoModule and ErrLaunchConfig are
	// package device's: a module image refused, a kernel not in the
	// module, a module not loaded, a launch configuration refused. Each
	// comes inside a *device.KernelError naming the module and function.
	ErrBadModule    = device.ErrBadModule
	ErrNoFunction   = device.ErrNoFunction
	ErrNoModule     = device.ErrNoModule
	ErrLaunchConfig = device.ErrLaunchConfig
)

// StopError is the error of a stop that gave up waiting for the GPU thread
// (Worker.StopContext, Manager.CloseContext): a forward step was still
// running when the context was done. The GPU thread frees what the ledger
// holds, and exits, when the step returns. errors.Is(err, ErrClosed) and
// errors.Is(err, Cause) hold.
type StopError struct {
	// HeldBytes is what the ledger held after the last request the GPU
	// thread finished, in bytes: what was not freed yet.
	HeldBytes int64
	// Cause is the context's error.
	Cause error
}

func (e *StopError) Error() string {
	return fmt.Sprintf("stop gpu worker: gave up waiting (%v) for a forward step still running on the GPU thread; %s held in the ledger are freed by that thread when the step returns (wait for Done)",
		e.Cause, arena.HumanBytes(e.HeldBytes))
}

// Unwrap returns ErrClosed and the cause.
func (e *StopError) Unwrap() []error { return []error{ErrClosed, e.Cause} }

// StepPanicError is the error of a forward step that panicked: the value it
// panicked with and the stack of the step's goroutine at the panic (what a
// crash would have printed). errors.Is(err, ErrStepPanic) holds, and so does
// errors.Is(err, v) when the value v is itself an error.
type StepPanicError struct {
	Value any
	Stack []byte
}

func (e *StepPanicError) Error() string { return fmt.Sprintf("%v: %v", ErrStepPanic, e.Value) }

// Unwrap returns ErrStepPanic, and the panic's value when it is an error.
func (e *StepPanicError) Unwrap() []error {
	if v, ok := e.Value.(error); ok {
		return []error{ErrStepPanic, v}
	}
	return []error{ErrStepPanic}
}
