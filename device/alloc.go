package device

// The ledger owners the manager reserves for itself, beside ArenaOwner and
// SlabOwner's "slab/…": an embedder's Alloc may not use them, so that its
// frees can never reach the manager's own allocations.
const (
	// UserOwner is the owner of an embedder's allocation made without an
	// owner of its own (gpuarena.Manager.Alloc's default).
	UserOwner = "user"
	// WeightsOwner is the owner of every allocation a weights load makes
	// (gpuarena.Manager.LoadWeights): the pool, or one allocation per tensor.
	WeightsOwner = "weights"
	// KVCacheOwner is the owner of the KV cache's allocations
	// (gpuarena.Manager.BuildKVCache): one per group, labelled with the
	// group's name.
	KVCacheOwner = "kv_cache"
)

// ReservedOwner reports whether owner is one the manager keeps for itself:
// ArenaOwner, WeightsOwner, KVCacheOwner, or any SlabOwner ("slab/" prefix).
func ReservedOwner(owner string) bool {
	switch owner {
	case ArenaOwner, WeightsOwner, KVCacheOwner:
		return true
	}
	return IsSlabOwner(owner)
}

// Allocation is one device allocation an embedder made with
// gpuarena.Manager.Alloc: Bytes bytes at Ptr, recorded in the ledger as Label
// under Owner. It is a plain value; free it with Manager.Free (or everything
// of its owner with Manager.FreeOwner). A forward step may use it through
// its Device like an arena buffer: every range is checked against the
// ledger.
type Allocation struct {
	// Ptr is the allocation's device pointer, never 0.
	Ptr DevicePtr `json:"ptr"`
	// Bytes is its size in bytes, > 0.
	Bytes int64 `json:"bytes"`
	// Label is the name the ledger records it under.
	Label string `json:"label"`
	// Owner is the ledger owner it is held by (UserOwner by default).
	Owner string `json:"owner"`
}
