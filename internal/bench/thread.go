package bench

import "runtime"

// thread is a goroutine locked to its own OS thread that runs the functions
// handed to it, one at a time: the device thread of the direct target and of
// the direct build and carve measurements. It never unlocks the thread, so
// the thread (and whatever CUDA context was current on it) ends with it.
type thread struct {
	fns  chan func()
	done chan struct{}
}

// startThread starts a locked thread.
func startThread() *thread {
	t := &thread{fns: make(chan func()), done: make(chan struct{})}
	go func() {
		runtime.LockOSThread()
		defer close(t.done)
		for fn := range t.fns {
			fn()
		}
	}()
	return t
}

// do runs fn on the thread and returns its error.
func (t *thread) do(fn func() error) error {
	errc := make(chan error, 1)
	t.fns <- func() { errc <- fn() }
	return <-errc
}

// stop ends the thread and waits for it. Call it once.
func (t *thread) stop() {
	close(t.fns)
	<-t.done
}
