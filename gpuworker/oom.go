package gpuworker

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
)

// OutOfMemoryError is the error of an allocation the device (or the budget)
// could not hold. It carries everything needed to act on it without a
// debugger; errors.Is(err, ErrOutOfMemory) holds for it, and errors.As finds
// it whatever the backend.
type OutOfMemoryError struct {
	// Label and Owner name what was asked for; Bytes is its size.
	Label string
	Owner string
	Bytes int64
	// DeviceTotal and DeviceFree are the device's memory at the time, in bytes
	// (cuMemGetInfo); DeviceFree is -1 when it could not be read.
	DeviceTotal int64
	DeviceFree  int64
	// HeldByOwner is what this process holds, per owner, in bytes.
	HeldByOwner map[string]int64
	// Budget is the most this process may hold (gpu_memory_utilization ×
	// total), in bytes; 0 when no budget is set.
	Budget int64
	// OverBudget is true when the budget, not the device, refused the request.
	OverBudget bool
	// Largest are the largest live allocations, largest first (at most 3).
	Largest []device.LedgerEntry
	// Cause is the backend's own error, when the device refused.
	Cause error
	// ShortfallBytes is how many bytes more the request needs than there
	// was room for: Bytes − (Budget − what this process held) when
	// OverBudget, Bytes − DeviceFree when the device refused and its free
	// memory could be read, else 0.
	ShortfallBytes int64
}

// Error reads as one sentence a user can act on.
func (e *OutOfMemoryError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "out of device memory: asked %s for %s (owner %q)", arena.HumanBytes(e.Bytes), e.Label, e.Owner)
	if e.OverBudget {
		fmt.Fprintf(&b, ", which would pass this process's budget of %s by %s (%d B)", arena.HumanBytes(e.Budget), arena.HumanBytes(e.ShortfallBytes), e.ShortfallBytes)
	}
	if e.DeviceFree >= 0 {
		fmt.Fprintf(&b, "; the device has %s free of %s", arena.HumanBytes(e.DeviceFree), arena.HumanBytes(e.DeviceTotal))
	}
	var held int64
	owners := make([]string, 0, len(e.HeldByOwner))
	for o, n := range e.HeldByOwner {
		held += n
		owners = append(owners, o)
	}
	sort.Strings(owners)
	fmt.Fprintf(&b, "; this process holds %s", arena.HumanBytes(held))
	if len(owners) > 0 {
		parts := make([]string, len(owners))
		for i, o := range owners {
			parts[i] = fmt.Sprintf("%s %s", o, arena.HumanBytes(e.HeldByOwner[o]))
		}
		fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
	}
	if !e.OverBudget && e.Budget > 0 {
		fmt.Fprintf(&b, " of a %s budget", arena.HumanBytes(e.Budget))
	}
	if len(e.Largest) > 0 {
		parts := make([]string, len(e.Largest))
		for i, l := range e.Largest {
			parts[i] = fmt.Sprintf("%s %s", l.Label, arena.HumanBytes(l.Bytes))
		}
		fmt.Fprintf(&b, "; largest: %s", strings.Join(parts, ", "))
	}
	b.WriteString("; lower max_batch_tokens or max_seq_len, raise gpu_memory_utilization, or free memory held by other processes")
	return b.String()
}

// Unwrap returns ErrOutOfMemory and the backend's error.
func (e *OutOfMemoryError) Unwrap() []error {
	if e.Cause != nil {
		return []error{ErrOutOfMemory, e.Cause}
	}
	return []error{ErrOutOfMemory}
}
