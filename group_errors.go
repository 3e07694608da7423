package gpuarena

import (
	"fmt"

	"github.com/gpuarena/gpuarena/gpuworker"
)

// RankError is the error of one rank of a group call: which call, which
// rank, and the rank's device. It unwraps to the rank's error, so
// errors.Is(err, ErrOutOfMemory) and errors.As(err, **gpuworker.OutOfMemoryError)
// see through it. A group call that failed on several ranks returns their
// RankErrors joined in rank order (errors.Join); errors.As finds the
// lowest rank's.
type RankError struct {
	// Op is the group call: "start", "build arena", "forward", "load
	// weights", "release", "close", ….
	Op string
	// Rank is the rank that failed.
	Rank int
	// Device is the rank's device; zero for a rank that did not start.
	Device gpuworker.DeviceInfo
	// Err is the rank's error.
	Err error
}

// Error names the call, the rank and its device, then the rank's error.
func (e *RankError) Error() string {
	if e.Device.Name == "" {
		return fmt.Sprintf("group %s: rank %d: %v", e.Op, e.Rank, e.Err)
	}
	return fmt.Sprintf("group %s: rank %d (%s device %d, %s): %v", e.Op, e.Rank, e.Device.Backend, e.Device.Ordinal, e.Device.Name, e.Err)
}

// Unwrap returns the rank's error.
func (e *RankError) Unwrap() error { return e.Err }

// rankError wraps err of rank r's op with r's device.
func (g *Group) rankError(op string, r int, err error) *RankError {
	return &RankError{Op: op, Rank: r, Device: g.ranks[r].Device(), Err: err}
}
