package gpuworker

import (
	"context"
	"errors"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// ErrNotCapturable and ErrNoGraph are package device's: a call a captured
// graph cannot hold, made during a capture; a graph not held. Each comes
// inside a *device.GraphError naming the graph, or wrapped with the call.
var (
	ErrNotCapturable = device.ErrNotCapturable
	ErrNoGraph       = device.ErrNoGraph
)

// CaptureGraph captures the kernel launches capture makes into a graph
// named name and instantiates it, on the GPU thread (cuda:
// cuStreamBeginCapture on the step stream in
// CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, the launches, cuStreamEndCapture,
// cuGraphInstantiateWithFlags; hostsim records the launches and replays
// them in order). capture runs like a forward step, one at a time with
// the other requests, and gets a device.Device whose Launch is recorded,
// not run, with a step's checks; every other call is refused with
// ErrNotCapturable before it reaches the driver. The worker holds the
// graph until DestroyGraph or Stop; a step replays it with
// device.Device.LaunchGraph. The ledger lists it (device.Ledger.Graphs).
//
// A capture whose function returns an error, panics, or makes a launch
// that fails is ended and dropped: nothing of it is left, and its error
// is returned. Errors, each a *device.GraphError naming the graph: the
// function's, a launch's (*device.KernelError), ErrStepPanic,
// ErrNotCapturable (the driver invalidated the capture), ErrNoCompute,
// ErrInvalidValue (an empty name, one held already, a nil function),
// ErrDeviceFault; and ErrClosed, the context's.
func (w *Worker) CaptureGraph(ctx context.Context, name string, capture func(device.Device) error) (device.Graph, error) {
	r, err := graphCaptures.ask(ctx, w, messages.CaptureGraph{Ctx: ctx, Name: name, Capture: capture})
	return r.Graph, errors.Join(err, r.Err)
}

// DestroyGraph destroys the graph name (cuGraphExecDestroy); replays of it
// then fail with ErrNoGraph. Errors: a *device.GraphError with ErrNoGraph
// when no graph of that name is held; the backend's; ErrClosed; the
// context's.
func (w *Worker) DestroyGraph(ctx context.Context, name string) error {
	r, err := graphDestroys.ask(ctx, w, messages.DestroyGraph{Ctx: ctx, Name: name})
	return errors.Join(err, r)
}
