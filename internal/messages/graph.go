package messages

import (
	"context"

	"github.com/gpuarena/gpuarena/device"
)

// CaptureGraph asks the GPU actor to capture the kernel launches Capture
// makes into a graph named Name, unique among the graphs held. Capture
// runs on the GPU thread with a Device whose launches are recorded, not
// run. Reply: CaptureGraphReply.
type CaptureGraph struct {
	Ctx     context.Context
	Name    string
	Capture func(device.Device) error
	Reply   chan<- CaptureGraphReply
}

// CaptureGraphReply answers CaptureGraph: the graph, or a
// *device.GraphError (the capture function's error, device.ErrNotCapturable,
// gpuworker.ErrNoCompute, gpuworker.ErrInvalidValue for an empty or taken
// name), or the context's error when it was done before the work started.
type CaptureGraphReply struct {
	Graph device.Graph
	Err   error
}

// DestroyGraph asks the GPU actor to destroy the graph Name. Reply: the
// error, nil on success (a *device.GraphError with device.ErrNoGraph when
// no graph of that name is held).
type DestroyGraph struct {
	Ctx   context.Context
	Name  string
	Reply chan<- error
}

// Fail answers the request with err and no graph.
func (m *CaptureGraph) Fail(err error) { m.Reply <- CaptureGraphReply{Err: err} }

// Fail answers the request with err.
func (m *DestroyGraph) Fail(err error) { m.Reply <- err }
