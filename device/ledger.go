package device

import "time"

// Ledger is a snapshot of every live allocation, oldest first, and the
// ledger's counters. Bytes are device bytes.
type Ledger struct {
	// Entries are the live allocations and the views inside them, oldest
	// first.
	Entries []LedgerEntry `json:"entries"`
	// Counters are the running totals since the GPU worker started.
	Counters LedgerCounters `json:"counters"`
	// Owners is the usage of every owner that has ever allocated, by owner.
	Owners map[string]OwnerUsage `json:"owners"`
	// BackendBytesInUse is what the backend itself reports as allocated, in
	// bytes (hostsim), or -1 where the backend cannot tell (cuda); it must
	// equal Counters.CurrentBytes.
	BackendBytesInUse int64 `json:"backend_bytes_in_use"`
	// Taken is when the snapshot was taken.
	Taken time.Time `json:"taken"`
	// Retired are the owners recorded as retired, sorted: the arena's
	// supervisors retire ArenaOwner when the arena is released
	// (gpuworker.Worker.RetireOwners).
	Retired []string `json:"retired,omitempty"`
	// Modules are the kernel modules loaded (gpuarena.Manager.LoadModule),
	// oldest first. They are not allocations: Counters leave them out.
	Modules []ModuleEntry `json:"modules,omitempty"`
	// Graphs are the captured graphs held (gpuarena.Manager.CaptureGraph),
	// oldest first. They are not allocations: Counters leave them out.
	Graphs []GraphEntry `json:"graphs,omitempty"`
}

// BytesByOwner is the bytes each owner holds now, by owner (owners holding
// none left out).
func (l Ledger) BytesByOwner() map[string]int64 {
	m := make(map[string]int64)
	for o, u := range l.Owners {
		if u.CurrentBytes > 0 {
			m[o] = u.CurrentBytes
		}
	}
	return m
}

// LedgerEntry is one live allocation, or one buffer inside a pool allocation
// (a view: Parent is the pool's pointer, and its bytes are counted in the
// pool's, not again in the counters).
type LedgerEntry struct {
	// Ptr is the allocation's (or view's) device pointer, Bytes its size in
	// bytes.
	Ptr   DevicePtr `json:"ptr"`
	Bytes int64     `json:"bytes"`
	// Label names what the bytes hold: a buffer's name ("logits"),
	// PoolLabel, a slab's name, or a caller's own label.
	Label string `json:"label"`
	// Owner is who holds it: ArenaOwner, SlabOwner(name), or a caller's own
	// owner id.
	Owner string `json:"owner"`
	// Parent is the pointer of the allocation a view lies in; 0 for an
	// allocation.
	Parent DevicePtr `json:"parent,omitempty"`
	// Created is when the allocation (or view) was recorded.
	Created time.Time `json:"created"`
	// Tag is an opaque value the arena's supervisors attach to a built
	// arena's allocations, so that a restarted supervisor rebuilds its state
	// from the ledger. It is nil on every other allocation, means nothing
	// outside gpuarena, and is never serialised.
	Tag any `json:"-"`
	// Age is how long the allocation had lived when the snapshot was taken.
	Age time.Duration `json:"age_ns"`
}

// LedgerCounters are the ledger's running totals since the GPU worker
// started.
type LedgerCounters struct {
	// CurrentBytes is the sum of the live allocations' bytes (views not
	// counted again); PeakBytes its maximum so far.
	CurrentBytes int64 `json:"current_bytes"`
	PeakBytes    int64 `json:"peak_bytes"`
	// Allocations and Frees count successful backend allocations and frees;
	// Failures counts allocations refused (by the backend or the budget).
	Allocations uint64 `json:"allocations"`
	Frees       uint64 `json:"frees"`
	Failures    uint64 `json:"failures"`
}

// OwnerUsage is what one owner holds now and has held at most, in bytes.
type OwnerUsage struct {
	// CurrentBytes is what the owner holds now; PeakBytes the most it held
	// at once.
	CurrentBytes int64 `json:"current_bytes"`
	PeakBytes    int64 `json:"peak_bytes"`
}
