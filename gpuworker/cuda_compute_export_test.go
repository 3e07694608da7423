//go:build cuda

package gpuworker

import (
	"runtime"
)

// CUDADirect is a cuda backend on its own locked OS thread, without the
// GPU actor: the benchmarks' baseline, which launches through the same one
// cgo call to cuLaunchKernel as a step does, with nothing around it.
type CUDADirect struct {
	calls chan func(Compute)
	done  chan error
}

// NewCUDADirect opens device 0 on a new locked thread.
func NewCUDADirect() (*CUDADirect, error) {
	d := &CUDADirect{calls: make(chan func(Compute)), done: make(chan error, 1)}
	opened := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		b, err := newCUDABackend(0)
		opened <- err
		if err != nil {
			return
		}
		for f := range d.calls {
			f(b.(*cudaBackend))
		}
		d.done <- b.Close()
	}()
	if err := <-opened; err != nil {
		return nil, err
	}
	return d, nil
}

// Run runs f on the backend's thread and waits for it.
func (d *CUDADirect) Run(f func(Compute)) {
	ran := make(chan struct{})
	d.calls <- func(c Compute) { f(c); close(ran) }
	<-ran
}

// Close closes the backend and ends its thread.
func (d *CUDADirect) Close() error {
	close(d.calls)
	return <-d.done
}
