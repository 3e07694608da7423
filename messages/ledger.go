package messages

import "time"

// LedgerEntry is one live allocation, or one buffer inside a pool allocation
// (a view: Parent is the pool's pointer, and its bytes are counted in the
// pool's, not again in the counters).
type LedgerEntry struct {
	Ptr     DevicePtr `json:"ptr"`
	Bytes   int64     `json:"bytes"`
	Label   string    `json:"label"`
	Owner   string    `json:"owner"`
	Parent  DevicePtr `json:"parent,omitempty"`
	Created time.Time `json:"created"`
	// Tag is an opaque value the allocation's owner attached to it
	// (AllocBatch.Tag): the supervisors tag a built arena's allocations with its
	// *Arena, so that a restarted supervisor rebuilds its state from the
	// ledger. It is never serialised.
	Tag any `json:"-"`
	// Age is how long the allocation had lived when the snapshot was taken.
	Age time.Duration `json:"age_ns"`
}

// LedgerCounters are the ledger's running totals since the GPU actor started.
type LedgerCounters struct {
	// CurrentBytes is the sum of the live entries' bytes; PeakBytes its maximum.
	CurrentBytes int64 `json:"current_bytes"`
	PeakBytes    int64 `json:"peak_bytes"`
	// Allocations and Frees count successful backend calls; Failures counts
	// allocations the backend refused.
	Allocations uint64 `json:"allocations"`
	Frees       uint64 `json:"frees"`
	Failures    uint64 `json:"failures"`
}

// OwnerUsage is what one owner holds now and has held at most, in bytes.
type OwnerUsage struct {
	CurrentBytes int64 `json:"current_bytes"`
	PeakBytes    int64 `json:"peak_bytes"`
}

// Ledger is a snapshot of every live allocation, oldest first, and the counters.
type Ledger struct {
	Entries  []LedgerEntry  `json:"entries"`
	Counters LedgerCounters `json:"counters"`
	// Owners is the usage of every owner that has ever allocated.
	Owners map[string]OwnerUsage `json:"owners"`
	// BackendBytesInUse is what the backend itself reports as allocated
	// (hostsim) or -1 where the backend cannot tell (cuda); it must equal
	// Counters.CurrentBytes.
	BackendBytesInUse int64     `json:"backend_bytes_in_use"`
	Taken             time.Time `json:"taken"`
	// Retired are the owners retired with RetireOwners, sorted: the
	// supervisors record there that the arena was released.
	Retired []string `json:"retired,omitempty"`
}

// BytesByOwner is the bytes each owner holds now (owners holding none left out).
func (l Ledger) BytesByOwner() map[string]int64 {
	m := make(map[string]int64)
	for o, u := range l.Owners {
		if u.CurrentBytes > 0 {
			m[o] = u.CurrentBytes
		}
	}
	return m
}
