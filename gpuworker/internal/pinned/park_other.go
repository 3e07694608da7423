//go:build !linux

package pinned

// park waits until there is work (true) or Stop was called (false), in the
// Go scheduler: futex(2), the other way to park (park_linux.go), is Linux's.
// Callers then poll for a woken goroutine only while it is awake
// (worthPolling).
func (d *Dispatcher) park() bool {
	d.readProcs()
	d.idle.Store(true)
	defer d.idle.Store(false)
	return d.parkInScheduler()
}

// notify wakes the goroutine if it is parked; call it after queueing work.
func (d *Dispatcher) notify() {
	if d.parked.Load() == parkedInScheduler {
		d.wakeScheduler()
	}
}
