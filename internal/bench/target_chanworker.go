package bench

import (
	"runtime"

	"github.com/gpuarena/gpuarena/gpuworker"
)

// chanWorker is gorgonia.org/cu v0.9.6's Ctx work loop (ctx.go: Ctx.Run and
// Ctx.Do), copied rather than imported so it runs on any backend: a
// goroutine locked to its thread reads functions from an unbuffered channel
// and answers each on an unbuffered error channel; Do sends the function and
// waits for the answer. Two unbuffered channels pair each call with its
// answer, so Do is safe from many goroutines.
//
// Two differences from cu, neither on the measured path: the backend is
// opened where cu makes its context current, and the goroutine never unlocks
// its thread when it ends (cu does), so no other goroutine inherits it.
type chanWorker struct {
	work    chan func() error
	errChan chan error
	exited  chan struct{}
	backend gpuworker.Backend
}

// newChanWorker starts the locked goroutine and opens a backend with f there.
func newChanWorker(f gpuworker.BackendFactory) (*chanWorker, error) {
	w := &chanWorker{work: make(chan func() error), errChan: make(chan error), exited: make(chan struct{})}
	ready := make(chan error)
	go w.run(f, ready)
	if err := <-ready; err != nil {
		<-w.exited
		return nil, err
	}
	return w, nil
}

// run is cu's Ctx.Run: lock the thread, set up, then answer each function.
func (w *chanWorker) run(f gpuworker.BackendFactory, ready chan error) {
	runtime.LockOSThread()
	defer close(w.exited)
	b, err := f()
	if err != nil {
		ready <- err
		return
	}
	w.backend = b
	close(ready)
	for fn := range w.work {
		w.errChan <- fn()
	}
}

// Do is cu's Ctx.Do: it runs fn on the locked thread and returns its error.
func (w *chanWorker) Do(fn func() error) error {
	w.work <- fn
	return <-w.errChan
}

// Concurrent is true: Do pairs calls and answers.
func (w *chanWorker) Concurrent() bool { return true }

// Exec runs body with a call that goes through Do, as code built on cu's Ctx
// does (a closure that stores the results, then the error).
func (w *chanWorker) Exec(body func(call func(Op) error) error) error {
	return body(func(op Op) error {
		switch op {
		case OpMemInfo:
			var free, total int64
			err := w.Do(func() error {
				var err error
				free, total, err = w.backend.MemInfo()
				return err
			})
			_, _ = free, total
			return err
		default:
			return w.Do(func() error { return backendOp(w.backend, op) })
		}
	})
}

// Close closes the backend on the locked thread and ends the goroutine.
func (w *chanWorker) Close() error {
	err := w.Do(w.backend.Close)
	close(w.work)
	<-w.exited
	return err
}
