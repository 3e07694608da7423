package device

import "github.com/gpuarena/gpuarena/kvcache"

// KVStats is the KV cache's block pool as the KV supervisor holds it: each
// group's blocks (or slots) by state, the prefix cache's counters and the
// sequences held.
type KVStats struct {
	// Groups are the pool's groups, in KVCache.Groups order.
	Groups []KVGroupStats `json:"groups"`
	// Prefix counts prefix-cache lookups and hits (vLLM's
	// PrefixCacheStats).
	Prefix kvcache.PrefixStats `json:"prefix"`
	// Sequences is the sequences the pool holds.
	Sequences int `json:"sequences"`
}

// KVGroupStats is one group's counts: Total usable blocks (slots) = Free +
// Cached + Used.
type KVGroupStats struct {
	// Name is the group's name (arena.KVGroup*).
	Name string `json:"name"`
	kvcache.GroupCounts
}
