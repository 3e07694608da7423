package bench

import "github.com/gpuarena/gpuarena/gpuworker"

// direct is the floor: the backend called on its own locked thread, by the
// goroutine that measures.
type direct struct {
	t       *thread
	backend gpuworker.Backend
}

// newDirect opens a backend with f on a new locked thread.
func newDirect(f gpuworker.BackendFactory) (*direct, error) {
	d := &direct{t: startThread()}
	err := d.t.do(func() error {
		var err error
		d.backend, err = f()
		return err
	})
	if err != nil {
		d.t.stop()
		return nil, err
	}
	return d, nil
}

// Concurrent is false: only the device thread may call the backend.
func (d *direct) Concurrent() bool { return false }

// Exec runs body on the device thread, with a call that runs the operation
// right there.
func (d *direct) Exec(body func(call func(Op) error) error) error {
	return d.t.do(func() error {
		return body(func(op Op) error { return backendOp(d.backend, op) })
	})
}

// Close closes the backend on its thread and ends the thread.
func (d *direct) Close() error {
	err := d.t.do(d.backend.Close)
	d.t.stop()
	return err
}
