//go:build cuda

package gpuworker

/*
#include <cuda.h>
*/
import "C"

import (
	"fmt"
)

// gorgonia.org/cu v0.9.6 builds graphs node by node but has no stream
// capture, instantiation or launch of a graph; this file calls
// cuStreamBeginCapture, cuStreamEndCapture, cuGraphInstantiateWithFlags,
// cuGraphDestroy, cuGraphLaunch and cuGraphExecDestroy itself.
//
// The capture mode is CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: the driver
// refuses a potentially unsafe call (one that would wait for or allocate
// behind the capture's back) made on the GPU thread during the capture —
// a second guard behind the GPU actor's own refusal of every call but a
// launch — while the embedder's other threads, with CUDA work of their own
// (another device's manager, cuBLAS on its own context), are not
// restricted by it as CU_STREAM_CAPTURE_MODE_GLOBAL would restrict them.
// RELAXED was not chosen: it would let such a call through; its one gain,
// ending a capture from another thread, is not needed, since a capture
// that runtime.Goexit cuts short is ended by a deferred call on its own
// thread before the goroutine ends.
//
// cuGraphInstantiateWithFlags (flags 0) rather than cuGraphInstantiate:
// CUDA 11.8's cuda.h maps cuGraphInstantiate to cuGraphInstantiate_v2
// (error node and log buffer), CUDA 12's to the flags form; the flags
// form has one signature in both.

// captureErr translates a result of a capture call: the driver's refusals
// of a capture (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, _INVALIDATED,
// _MERGE, _UNMATCHED, _UNJOINED, _ISOLATION, _IMPLICIT,
// CUDA_ERROR_CAPTURED_EVENT, _STREAM_CAPTURE_WRONG_THREAD) are
// ErrNotCapturable; the rest go through cudaErr.
func captureErr(op string, r C.CUresult) error {
	switch r {
	case C.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, C.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
		C.CUDA_ERROR_STREAM_CAPTURE_MERGE, C.CUDA_ERROR_STREAM_CAPTURE_UNMATCHED,
		C.CUDA_ERROR_STREAM_CAPTURE_UNJOINED, C.CUDA_ERROR_STREAM_CAPTURE_ISOLATION,
		C.CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, C.CUDA_ERROR_CAPTURED_EVENT,
		C.CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD:
		return fmt.Errorf("%s: %w (%s)", op, ErrNotCapturable, cudaResultText(cuResultError(r)))
	}
	return cudaErr(op, cuResultError(r))
}

// BeginCapture puts the step stream in capture mode (cuStreamBeginCapture,
// CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).
func (b *cudaBackend) BeginCapture() error {
	if err := b.checkOpen("begin capture"); err != nil {
		return err
	}
	if err := b.stepStream(); err != nil {
		return err
	}
	if r := C.cuStreamBeginCapture(b.compute.streamC, C.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL); r != C.CUDA_SUCCESS {
		return captureErr("cuStreamBeginCapture(step stream, thread local)", r)
	}
	return nil
}

// EndCapture ends the capture (cuStreamEndCapture); with keep it
// instantiates the graph (cuGraphInstantiateWithFlags), and either way it
// destroys the captured graph (cuGraphDestroy): the instantiated one does
// not need it.
func (b *cudaBackend) EndCapture(keep bool) (GraphHandle, error) {
	var g C.CUgraph
	r := C.cuStreamEndCapture(b.compute.streamC, &g)
	if g != nil {
		defer C.cuGraphDestroy(g) // the capture's result is the one to report
	}
	if r != C.CUDA_SUCCESS {
		return 0, captureErr("cuStreamEndCapture(step stream)", r)
	}
	if !keep {
		return 0, nil
	}
	var e C.CUgraphExec
	if r := C.cuGraphInstantiateWithFlags(&e, g, 0); r != C.CUDA_SUCCESS {
		return 0, cudaErr("cuGraphInstantiateWithFlags", cuResultError(r))
	}
	b.compute.graphs = append(b.compute.graphs, e)
	return GraphHandle(len(b.compute.graphs) - 1), nil
}

// LaunchGraph replays a graph on the step stream (cuGraphLaunch).
func (b *cudaBackend) LaunchGraph(h GraphHandle) error {
	if err := b.stepStream(); err != nil {
		return err
	}
	if r := C.cuGraphLaunch(b.compute.graphs[h], b.compute.streamC); r != C.CUDA_SUCCESS {
		return cudaErr("cuGraphLaunch(step stream)", cuResultError(r))
	}
	return nil
}

// DestroyGraph frees an instantiated graph (cuGraphExecDestroy).
func (b *cudaBackend) DestroyGraph(h GraphHandle) error {
	if err := b.checkOpen("destroy graph"); err != nil {
		return err
	}
	e := b.compute.graphs[h]
	b.compute.graphs[h] = nil
	if r := C.cuGraphExecDestroy(e); r != C.CUDA_SUCCESS {
		return cudaErr("cuGraphExecDestroy", cuResultError(r))
	}
	return nil
}

// closeGraphs destroys every graph still held, going on after a failure.
func (b *cudaBackend) closeGraphs() []error {
	var errs []error
	for _, e := range b.compute.graphs {
		if e != nil {
			if r := C.cuGraphExecDestroy(e); r != C.CUDA_SUCCESS {
				errs = append(errs, cudaErr("cuGraphExecDestroy", cuResultError(r)))
			}
		}
	}
	return errs
}
