//go:build !linux

package gpuworker

// hostMemory returns n zeroed bytes of the Go heap: without Linux's mmap
// flags the simulated device's memory is ordinary Go memory, which the
// runtime takes from the system as it grows and which counts toward the
// heap's size (GOGC). It never fails: a size the system cannot give ends the
// program, as any Go allocation does; HostSim's capacity bounds it.
func hostMemory(n int) ([]byte, error) { return make([]byte, n), nil }

// releaseHostMemory drops nothing itself: once HostSim forgets mem, the
// garbage collector frees it. It never fails.
func releaseHostMemory([]byte) error { return nil }

// zeroHostMemory zeroes dst.
func zeroHostMemory(dst []byte) { clear(dst) }
