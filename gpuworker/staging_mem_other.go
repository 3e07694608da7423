//go:build !linux

package gpuworker

import "fmt"

// mapStaging returns bytes zeroed bytes of the Go heap: without Linux's
// mmap flags the staging memory is ordinary Go memory, with no huge pages
// asked for. The garbage collector does not move it, and the load holds it
// until the backend has unregistered it. Errors: ErrInvalidValue for bytes
// ≤ 0.
func mapStaging(bytes int64) ([]byte, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("map staging (%d B): %w: size must be > 0", bytes, ErrInvalidValue)
	}
	return make([]byte, bytes), nil
}

// unmapStaging drops nothing itself: the garbage collector frees mem. It
// never fails.
func unmapStaging([]byte) error { return nil }
