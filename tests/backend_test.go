package tests

import "github.com/gpuarena/gpuarena/gpuworker"

// testDevice is a backend for the backend-generic tests (testBackend).
type testDevice struct {
	// name is "hostsim" or "cuda".
	name    string
	factory gpuworker.BackendFactory
	// bytesInUse is what the device holds on this process's behalf now;
	// it may be read when no manager is open.
	bytesInUse func() int64
	// slack is how far from 0 bytesInUse may read when nothing is held.
	slack int64
}

// clean reports whether the device holds nothing for this process.
func (d testDevice) clean() (int64, bool) {
	n := d.bytesInUse()
	return n, n >= -d.slack && n <= d.slack
}
