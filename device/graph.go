package device

import (
	"errors"
	"fmt"
	"time"
)

// Sentinels of CUDA graphs, the same on every backend; package gpuworker
// and the module root re-export them.
var (
	// ErrNotCapturable: a call a captured graph cannot hold, made while a
	// graph is captured (gpuarena.Manager.CaptureGraph): a memset or a
	// synchronous copy (they run on the legacy default stream and wait for
	// it), an asynchronous copy to or from Go memory (a replay would read
	// or write that memory again, long after the call returned), an event
	// or a wait (RecordEvent, Elapsed, Synchronize: a capture runs
	// nothing, so there is nothing to time or wait for), a replay inside
	// the capture (LaunchGraph) and the raw cuda handles
	// (gpuworker.CUDAStep). The call is refused before it reaches the
	// driver, so the capture goes on; the error names the call. The
	// driver's own refusals during a capture
	// (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, _INVALIDATED, _IMPLICIT,
	// CUDA_ERROR_CAPTURED_EVENT, ...) are this error too.
	ErrNotCapturable = errors.New("not allowed while a graph is captured: a graph holds kernel launches only")
	// ErrNoGraph: no graph of that name is held (never captured, destroyed
	// since, or captured by another manager).
	ErrNoGraph = errors.New("graph not held")
)

// GraphError is the error of a graph's capture, replay or destruction:
// what was asked (Op) of which graph, and why. errors.Is(err, Err) holds,
// and so does errors.Is for what Err wraps (a capture function's own
// error among them).
type GraphError struct {
	// Op is "capture graph", "launch graph" or "destroy graph".
	Op string
	// Graph is the graph's name.
	Graph string
	// Err is the cause: ErrNotCapturable, ErrNoGraph, ErrNoModule (a
	// kernel the graph launches was unloaded), the capture function's
	// error, or a backend's (gpuworker.ErrDeviceFault, ...).
	Err error
}

// Error says what was asked of which graph, and why.
func (e *GraphError) Error() string { return fmt.Sprintf("%s %q: %v", e.Op, e.Graph, e.Err) }

// Unwrap returns Err.
func (e *GraphError) Unwrap() error { return e.Err }

// Graph is a forward step's kernel launches, captured once by
// gpuarena.Manager.CaptureGraph (on cuda: cuStreamBeginCapture on the
// step's stream, the launches, cuStreamEndCapture, then
// cuGraphInstantiateWithFlags) and replayed by Device.LaunchGraph as one
// launch (cuGraphLaunch). A replay runs the captured kernels with the
// configurations and the argument words they were captured with: the
// same device pointers and scalars, so a graph is only as valid as the
// memory it points to. It is a plain value; the manager holds the
// instantiated graph until DestroyGraph or Close.
type Graph struct {
	// Name is the name it was captured under, unique among the manager's
	// graphs.
	Name string `json:"name"`
	// Launches is how many kernel launches it holds, in capture order.
	Launches int `json:"launches"`
	// Handle identifies the graph to the GPU worker that captured it; it
	// means nothing elsewhere.
	Handle uint64 `json:"-"`
}

// GraphEntry is a graph as the ledger lists it. A graph is not an
// allocation: what the driver holds for it is not in the ledger's
// counters.
type GraphEntry struct {
	// Name and Launches are the Graph's.
	Name     string `json:"name"`
	Launches int    `json:"launches"`
	// Modules are the modules whose kernels it launches; unloading one
	// makes its replays fail with ErrNoModule.
	Modules []string `json:"modules"`
	// Captured is when it was captured.
	Captured time.Time `json:"captured"`
}
