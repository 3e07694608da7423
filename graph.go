package gpuarena

import (
	"context"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// Errors of CUDA graphs, re-exported (see package device).
var (
	// ErrNotCapturable: a call other than a kernel launch, made while a
	// graph is captured; refused before it reaches the driver, naming the
	// call.
	ErrNotCapturable = gpuworker.ErrNotCapturable
	// ErrNoGraph: a graph not held (never captured, destroyed since, or
	// another manager's).
	ErrNoGraph = gpuworker.ErrNoGraph
)

// CaptureGraph captures the kernel launches capture makes into a graph
// named name, on the GPU thread, and keeps it instantiated: on cuda,
// cuStreamBeginCapture on the step's stream
// (CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), capture's launches,
// cuStreamEndCapture and cuGraphInstantiateWithFlags; on the simulated
// device the launches are recorded through the same kernels, so the same
// step code and the same graph run on both. A forward step replays it as
// one launch with device.Device.LaunchGraph (cuGraphLaunch), which saves
// the launch-by-launch cost of a step of many small kernels (a decode
// step: vLLM's CUDAGraphWrapper in vllm/compilation/cuda_graph.py
// captures and replays a model's forward the same way).
//
// capture runs one at a time with the forward steps and gets a
// device.Device whose Launch is captured (every check of a step's), while
// every other call is refused with ErrNotCapturable, naming it, before
// it reaches the driver. A graph replays the configurations and argument
// words it was captured with: the same buffers (arena buffers, weights,
// the KV cache) and scalars; write the step's inputs into those buffers
// before the replay. Replaying a graph whose memory was freed is the
// caller's bug, as a bad pointer argument is (ErrDeviceFault); one whose
// module was unloaded is refused (ErrNoModule).
//
// The manager owns the graph until DestroyGraph or Close; Release does
// not destroy it (like a module, a graph is code, not arena memory). The
// ledger lists it (device.Ledger.Graphs).
//
// A capture whose function returns an error, panics or makes a launch
// that fails is ended and dropped, and its error returned. Errors, each a
// *device.GraphError naming the graph: that error, ErrNotCapturable (the
// driver invalidated the capture), ErrInvalidValue (an empty name, one
// held already, a nil function), ErrNoCompute, ErrDeviceFault; and
// ErrClosed, ErrReentrant, the context's.
func (m *Manager) CaptureGraph(ctx context.Context, name string, capture func(dev device.Device) error) (device.Graph, error) {
	return m.worker.CaptureGraph(ctx, name, capture)
}

// DestroyGraph destroys the graph name (cuGraphExecDestroy); replays of
// it then fail with ErrNoGraph. Errors: ErrNoGraph (a
// *device.GraphError) when none of that name is held, the driver's,
// ErrClosed, ErrReentrant, the context's.
func (m *Manager) DestroyGraph(ctx context.Context, name string) error {
	return m.worker.DestroyGraph(ctx, name)
}
