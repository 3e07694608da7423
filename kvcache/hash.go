package kvcache

import (
	"encoding/binary"
	"hash/maphash"
)

// HashFunc keys one full block in the prefix cache: a chained hash of the
// key of the block before it (parent; 0 for a sequence's first block), the
// block's kv_block_size token ids, and the sequence's extra keys (extra;
// only for the first block, nil after it: the chain carries them on). It is
// vLLM's kv_cache_utils.hash_block_tokens(parent_block_hash,
// curr_block_token_ids, extra_keys). The pool calls it from one goroutine
// at a time and does not keep tokens or extra.
//
// The key only finds candidates: a hit is verified against the block's
// stored tokens, parent and extra keys, so any function is correct, and
// a weak one (a constant) is only slow.
type HashFunc func(parent uint64, tokens []int32, extra []byte) uint64

// seededHash is the default HashFunc: hash/maphash of parent ‖ tokens
// (little-endian int32) ‖ extra under a seed drawn for each pool.
//
// Why not sha256, as vLLM (kv_cache_utils.py, hashing.sha256_cbor): vLLM
// trusts a hash match without looking at the block, and shares block
// hashes across processes (KV events, connectors), so it needs a
// collision-resistant, reproducible hash. Here every hit is checked
// against the block's own tokens and parent, so a collision costs a
// comparison, never a wrong block, and keys never leave the process. What
// the key must resist is a client choosing prompts whose keys collide (to
// make lookups walk long candidate lists): a seed the client cannot know
// does that, at a fraction of sha256's cost (maphash runs the runtime's
// AES-based map hash).
func seededHash() HashFunc {
	seed := maphash.MakeSeed()
	var buf []byte
	return func(parent uint64, tokens []int32, extra []byte) uint64 {
		b := binary.LittleEndian.AppendUint64(buf[:0], parent)
		for _, t := range tokens {
			b = binary.LittleEndian.AppendUint32(b, uint32(t))
		}
		b = append(b, extra...)
		buf = b
		return maphash.Bytes(seed, b)
	}
}
