package bench

import (
	"context"
	"runtime/trace"
	"sync/atomic"
	"time"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// driverClock adds up the time spent inside a backend's Alloc, Free and
// Memset calls (the calls of a build and a release), on whatever thread
// makes them. It tells the cost of reaching the device thread apart from the
// driver calls themselves, which on a GPU vary from run to run.
type driverClock struct{ total atomic.Int64 }

// elapsed is the time spent in timed calls so far.
func (c *driverClock) elapsed() time.Duration { return time.Duration(c.total.Load()) }

// wrap returns b with its Alloc, Free and Memset timed on c.
func (c *driverClock) wrap(b gpuworker.Backend) gpuworker.Backend { return timedBackend{b, c} }

// factory returns f with every backend it opens timed on c.
func (c *driverClock) factory(f gpuworker.BackendFactory) gpuworker.BackendFactory {
	return func() (gpuworker.Backend, error) {
		b, err := f()
		if err != nil || b == nil {
			return b, err
		}
		return c.wrap(b), nil
	}
}

// timedBackend is a Backend whose Alloc, Free and Memset add their duration
// to a driverClock.
type timedBackend struct {
	gpuworker.Backend
	clock *driverClock
}

// call starts a timed call: a trace region named name (an execution trace
// of the run shows each driver call) and the clock. Its end stops both; it
// allocates nothing, so the timing adds no garbage to the GPU thread.
func (t timedBackend) call(name string) timedCall {
	return timedCall{clock: t.clock, region: trace.StartRegion(context.Background(), name), start: time.Now()}
}

// timedCall is one backend call being timed (timedBackend.call).
type timedCall struct {
	clock  *driverClock
	region *trace.Region
	start  time.Time
}

// end adds the call's duration to the clock and ends its trace region.
func (c timedCall) end() {
	c.clock.total.Add(int64(time.Since(c.start)))
	c.region.End()
}

func (t timedBackend) Alloc(bytes int64) (device.DevicePtr, error) {
	defer t.call("driver alloc").end()
	return t.Backend.Alloc(bytes)
}

func (t timedBackend) Free(ptr device.DevicePtr) error {
	defer t.call("driver free").end()
	return t.Backend.Free(ptr)
}

func (t timedBackend) Memset(ptr device.DevicePtr, value byte, bytes int64) error {
	defer t.call("driver memset").end()
	return t.Backend.Memset(ptr, value, bytes)
}
