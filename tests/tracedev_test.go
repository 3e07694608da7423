package tests

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// traceDevice is the simulated device the fault scripts run on: it wraps a
// HostSim, records every call the GPU worker makes (operation, bytes,
// outcome; never pointers, which vary from run to run) and injects the
// faults a script arms. A fault is keyed by what it hits — an operation and
// the n-th call of it from the moment the fault is armed — not by a call
// number counted from the device's start, so a call added to another
// operation does not move it.
//
// Its Backend methods run on the GPU thread; arm, setSlow and take run on
// the test's goroutine: a mutex guards what they share.
type traceDevice struct {
	sim *gpuworker.HostSim

	mu     sync.Mutex
	sizes  map[device.DevicePtr]int64 // live allocations' sizes, for the frees' lines
	calls  []string                   // the trace since the last take
	armed  []*armedFault
	slow   time.Duration // added to every call
	slept  time.Duration // the delays added since the last take
	nSlept int           // the calls delayed since the last take
}

// faultKind is what an armed fault does to the call it hits.
type faultKind string

const (
	// kindFail makes the call fail without reaching the device: an Alloc
	// with gpuworker.ErrOutOfMemory, any other call with gpuworker.ErrInjected.
	kindFail faultKind = "fail"
	// kindPanic makes the call panic.
	kindPanic faultKind = "panic"
	// kindGoexit makes the call end the GPU thread's goroutine (runtime.Goexit).
	kindGoexit faultKind = "goexit"
	// kindDelay delays the call, which then reaches the device.
	kindDelay faultKind = "delay"
)

// armedFault hits the nth call of op (an operation name of callOps, "copy"
// for the three copies) from the moment it was armed, once.
type armedFault struct {
	op    string
	nth   int
	seen  int
	kind  faultKind
	delay time.Duration // for kindDelay
}

// callOps are the operations a trace names.
var callOps = []string{"alloc", "free", "memset", "copy-h2d", "copy-d2h", "copy-d2d", "mem-info"}

// matches says whether a call of op counts for f.
func (f *armedFault) matches(op string) bool {
	return f.op == op || f.op == "copy" && strings.HasPrefix(op, "copy-")
}

// newTraceDevice wraps sim.
func newTraceDevice(sim *gpuworker.HostSim) *traceDevice {
	return &traceDevice{sim: sim, sizes: make(map[device.DevicePtr]int64)}
}

// arm adds a fault that hits the nth call of op made from now on.
func (d *traceDevice) arm(op string, nth int, kind faultKind, delay time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.armed = append(d.armed, &armedFault{op: op, nth: nth, kind: kind, delay: delay})
}

// setSlow adds delay to every call from now on (a slow device).
func (d *traceDevice) setSlow(delay time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.slow = delay
}

// take returns the calls traced since the last take, and the delay added
// to them and to how many.
func (d *traceDevice) take() (calls []string, slept time.Duration, delayed int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	calls, slept, delayed = d.calls, d.slept, d.nSlept
	d.calls, d.slept, d.nSlept = nil, 0, 0
	return calls, slept, delayed
}

// before runs ahead of every call: it delays, panics or exits the goroutine
// as the armed faults say, and returns the error of a call that fails
// (without reaching the device). what is the call's line without its
// outcome ("alloc 1 MiB"); before returns it with the delay a fault added.
func (d *traceDevice) before(op, what string) (string, error) {
	d.mu.Lock()
	delay := d.slow
	var hit *armedFault
	for _, f := range d.armed { // each fault counts its own calls
		if f.seen < f.nth && f.matches(op) {
			if f.seen++; f.seen == f.nth && hit == nil {
				hit = f
			}
		}
	}
	switch {
	case hit == nil:
	case hit.kind == kindDelay:
		delay += hit.delay
		what = fmt.Sprintf("%s (delayed %v)", what, hit.delay)
	default:
		d.calls = append(d.calls, what+": injected "+string(hit.kind))
	}
	if delay > 0 {
		d.slept += delay
		d.nSlept++
	}
	d.mu.Unlock()

	time.Sleep(delay)
	switch {
	case hit == nil:
	case hit.kind == kindPanic:
		panic(fmt.Sprintf("injected panic in %s", op))
	case hit.kind == kindGoexit:
		runtime.Goexit()
	case hit.kind == kindFail && op == "alloc":
		return what, fmt.Errorf("%w (injected)", gpuworker.ErrOutOfMemory)
	case hit.kind == kindFail:
		return what, gpuworker.ErrInjected
	}
	return what, nil
}

// after records a call that reached the device, with its outcome.
func (d *traceDevice) after(what string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, what+": "+outcome(err))
}

// outcome is a call's result in a trace: ok, or its error's sentinel class.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	return errorClass(err)
}

// do runs one call: before, then the device's own call unless before failed
// it, then after.
func (d *traceDevice) do(op, what string, call func() error) error {
	what, err := d.before(op, what)
	if err != nil {
		return err
	}
	err = call()
	d.after(what, err)
	return err
}

// Info describes the simulated device.
func (d *traceDevice) Info() gpuworker.DeviceInfo { return d.sim.Info() }

// Alloc allocates on the simulated device.
func (d *traceDevice) Alloc(bytes int64) (p device.DevicePtr, err error) {
	err = d.do("alloc", "alloc "+size(bytes), func() error {
		p, err = d.sim.Alloc(bytes)
		return err
	})
	if err == nil {
		d.mu.Lock()
		d.sizes[p] = bytes
		d.mu.Unlock()
	}
	return p, err
}

// Free frees on the simulated device.
func (d *traceDevice) Free(ptr device.DevicePtr) error {
	d.mu.Lock()
	n, ok := d.sizes[ptr]
	d.mu.Unlock()
	what := "free " + size(n)
	if !ok {
		what = "free (not an allocation)"
	}
	err := d.do("free", what, func() error { return d.sim.Free(ptr) })
	if err == nil {
		d.mu.Lock()
		delete(d.sizes, ptr)
		d.mu.Unlock()
	}
	return err
}

// Memset sets memory on the simulated device.
func (d *traceDevice) Memset(ptr device.DevicePtr, value byte, bytes int64) error {
	return d.do("memset", fmt.Sprintf("memset %s to %#02x", size(bytes), value), func() error {
		return d.sim.Memset(ptr, value, bytes)
	})
}

// CopyHtoD copies to the simulated device.
func (d *traceDevice) CopyHtoD(dst device.DevicePtr, src []byte) error {
	return d.do("copy-h2d", "copy-h2d "+size(int64(len(src))), func() error { return d.sim.CopyHtoD(dst, src) })
}

// CopyDtoH copies from the simulated device.
func (d *traceDevice) CopyDtoH(dst []byte, src device.DevicePtr) error {
	return d.do("copy-d2h", "copy-d2h "+size(int64(len(dst))), func() error { return d.sim.CopyDtoH(dst, src) })
}

// CopyDtoD copies on the simulated device.
func (d *traceDevice) CopyDtoD(dst, src device.DevicePtr, bytes int64) error {
	return d.do("copy-d2d", "copy-d2d "+size(bytes), func() error { return d.sim.CopyDtoD(dst, src, bytes) })
}

// MemInfo reads the simulated device's memory.
func (d *traceDevice) MemInfo() (freeBytes, totalBytes int64, err error) {
	err = d.do("mem-info", "mem-info", func() error {
		freeBytes, totalBytes, err = d.sim.MemInfo()
		return err
	})
	return freeBytes, totalBytes, err
}

// Close closes the simulated device; it is traced, with no faults.
func (d *traceDevice) Close() error {
	err := d.sim.Close()
	d.after("close", err)
	return err
}

// BytesInUse is the simulated device's own count, which the ledger's
// snapshot reports beside its total.
func (d *traceDevice) BytesInUse() int64 { return d.sim.BytesInUse() }
