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
	// Device is the ordinal of the device that ran out (DeviceInfo.Ordinal:
	// the CUDA ordinal, a simulated machine's index); DeviceName its name
	// as the backend reports it ("NVIDIA H200"), "" when it has none. With
	// several devices (gpuarena.Group) they say which one without the
	// rank's error around it.
	Device     int
	DeviceName string
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

// Error reads as one sentence a user can act on: the device, what was
// asked, the budget or the device's free memory it passed, what this
// process holds, the largest allocations, and what to change for this
// request (hint).
func (e *OutOfMemoryError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "out of device memory on device %d", e.Device)
	if e.DeviceName != "" {
		fmt.Fprintf(&b, " (%s)", e.DeviceName)
	}
	fmt.Fprintf(&b, ": asked %s for %s (owner %q)", arena.HumanBytes(e.Bytes), e.Label, e.Owner)
	if e.OverBudget {
		fmt.Fprintf(&b, ", which would pass this process's budget of %s by %s (%d B)", arena.HumanBytes(e.Budget), arena.HumanBytes(e.ShortfallBytes), e.ShortfallBytes)
	}
	if e.DeviceFree >= 0 {
		fmt.Fprintf(&b, "; the device has %s free of %s", arena.HumanBytes(e.DeviceFree), arena.HumanBytes(e.DeviceTotal))
	}
	held := e.held()
	owners := make([]string, 0, len(e.HeldByOwner))
	for o := range e.HeldByOwner {
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
	b.WriteString("; ")
	b.WriteString(e.hint())
	return b.String()
}

// held is what this process holds, in bytes: HeldByOwner's sum.
func (e *OutOfMemoryError) held() int64 {
	var n int64
	for _, v := range e.HeldByOwner {
		n += v
	}
	return n
}

// hint is what to change, for the owner that asked: the sizing options that
// shrink the manager's own allocations (the arena, a slab, the weights, the
// KV cache), or for an embedder's own allocation (Manager.Alloc) the bytes
// asked, the budget left and its own allocations; and when the device, not
// the budget, refused for want of free memory (or its free memory could not
// be read), the memory other processes hold.
func (e *OutOfMemoryError) hint() string {
	var h string
	switch {
	case e.Owner == device.ArenaOwner:
		h = "lower max_batch_tokens or max_seq_len (the arena's buffers are sized by them), set logits_rows sampled, or raise gpu_memory_utilization"
	case device.IsSlabOwner(e.Owner):
		h = "turn fp8_rowwise off (the row-wise slab holds the GDN projections in BF16) or raise gpu_memory_utilization"
	case e.Owner == device.WeightsOwner:
		h = "the weights are loaded whole: raise gpu_memory_utilization, free your own allocations before the load, or split the model over more devices (tensor_parallel_size)"
	case e.Owner == device.KVCacheOwner:
		h = "build the KV cache with fewer blocks or sequences (arena.KVCacheRequest), free your own allocations first, or raise gpu_memory_utilization"
	default:
		h = fmt.Sprintf("asked %s", arena.HumanBytes(e.Bytes))
		if e.Budget > 0 {
			h += fmt.Sprintf(" with %s of this process's budget of %s left", arena.HumanBytes(max(e.Budget-e.held(), 0)), arena.HumanBytes(e.Budget))
		}
		h += fmt.Sprintf(": free your own allocations (Manager.Free, FreeOwner(%q)), or leave them room in gpu_memory_utilization's budget: build the KV cache with fewer blocks (it takes what the fit leaves) or raise gpu_memory_utilization", e.Owner)
	}
	if !e.OverBudget && e.DeviceFree < e.Bytes {
		h = "the device itself has less free than asked, within the budget: other processes hold memory the budget counted on, so free memory they hold or lower gpu_memory_utilization; or " + h
	}
	return h
}

// Unwrap returns ErrOutOfMemory and the backend's error.
func (e *OutOfMemoryError) Unwrap() []error {
	if e.Cause != nil {
		return []error{ErrOutOfMemory, e.Cause}
	}
	return []error{ErrOutOfMemory}
}
