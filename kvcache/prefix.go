package kvcache

// prefixIndex is the prefix cache of the paged groups of one kv_block_size:
// a tree of full blocks by content. A node is one block's tokens after a
// given parent node (the root's children also carry the sequence's extra
// keys); its key is the chained hash HashFunc(parent's key, tokens, extra),
// as vLLM's kv_cache_utils.hash_block_tokens, but a node is found by its
// key and then verified (parent node, tokens, extra), so two different
// prefixes never share a node whatever the hash does. Each group's blocks
// holding a node's content are attached to it (vLLM's
// BlockPool.cached_block_hash_to_block, one map per KV cache group).
//
// A node lives while something refers to it: a block attached to it, a
// child node, or a live sequence whose last full block it is. So a live
// sequence's whole path stays in the tree (its next full block always has
// a parent to hang from), and the nodes left by evicted blocks go as soon
// as nothing below them is cached. Nodes are slots in arrays reused through
// a free list; a dead node is referred to by nothing, so its slot can be
// reused at once.
type prefixIndex struct {
	// id is the index's position in Pool.indexes (and sequence.last).
	id        int
	blockSize int
	// groups are the pool's group ids using this index; a group's slot is
	// its position here.
	groups []int
	hash   HashFunc
	// buckets maps a key to the first node of that key; nextInBucket
	// chains the others (only a hash collision puts two nodes there).
	buckets map[uint64]int32
	// Per node.
	key          []uint64
	parent       []int32
	refs         []int32
	nextInBucket []int32
	extra        []string // a root node's extra keys; "" below the root
	tokens       []int32  // [nodes, blockSize]
	heads        []int32  // [nodes, len(groups)]: the newest attached block per group
	freeNodes    []int32
	live         int
}

// noNode is "no node": the root's parent, an empty path.
const noNode = -1

// noBlock ends a chain of attached blocks.
const noBlock = -1

func newPrefixIndex(id, blockSize int, hash HashFunc) *prefixIndex {
	return &prefixIndex{id: id, blockSize: blockSize, hash: hash, buckets: make(map[uint64]int32)}
}

// parentKey is the key a child of n chains from: 0 under the root.
func (x *prefixIndex) parentKey(n int32) uint64 {
	if n == noNode {
		return 0
	}
	return x.key[n]
}

// find returns the node holding tokens (one block) after parent, with
// extra when parent is the root, and the key it has or would have; noNode
// when there is none.
func (x *prefixIndex) find(parent int32, tokens []int32, extra []byte) (int32, uint64) {
	if parent != noNode {
		extra = nil
	}
	k := x.hash(x.parentKey(parent), tokens, extra)
	n, ok := x.buckets[k]
	if !ok {
		return noNode, k
	}
	for ; n != noNode; n = x.nextInBucket[n] {
		if x.parent[n] == parent && x.sameTokens(n, tokens) && (parent != noNode || x.extra[n] == string(extra)) {
			return n, k
		}
	}
	return noNode, k
}

func (x *prefixIndex) sameTokens(n int32, tokens []int32) bool {
	stored := x.nodeTokens(n)
	for i, t := range tokens {
		if stored[i] != t {
			return false
		}
	}
	return true
}

func (x *prefixIndex) nodeTokens(n int32) []int32 {
	b := x.blockSize
	return x.tokens[int(n)*b : int(n)*b+b]
}

// findOrCreate returns the node of tokens after parent, making it (with
// no references yet: the caller attaches a block at once) when absent.
func (x *prefixIndex) findOrCreate(parent int32, tokens []int32, extra []byte) int32 {
	n, k := x.find(parent, tokens, extra)
	if n != noNode {
		return n
	}
	if len(x.freeNodes) > 0 {
		n = x.freeNodes[len(x.freeNodes)-1]
		x.freeNodes = x.freeNodes[:len(x.freeNodes)-1]
		copy(x.nodeTokens(n), tokens)
	} else {
		n = int32(len(x.key))
		x.key = append(x.key, 0)
		x.parent = append(x.parent, 0)
		x.refs = append(x.refs, 0)
		x.nextInBucket = append(x.nextInBucket, 0)
		x.extra = append(x.extra, "")
		x.tokens = append(x.tokens, tokens...)
		for range x.groups {
			x.heads = append(x.heads, noBlock)
		}
	}
	x.key[n], x.parent[n], x.refs[n] = k, parent, 0
	x.extra[n] = ""
	if parent == noNode {
		x.extra[n] = string(extra)
	} else {
		x.refs[parent]++
	}
	if head, ok := x.buckets[k]; ok {
		x.nextInBucket[n] = head
	} else {
		x.nextInBucket[n] = noNode
	}
	x.buckets[k] = n
	x.live++
	return n
}

// pin counts one more reference to n (a sequence's last full block).
func (x *prefixIndex) pin(n int32) {
	if n != noNode {
		x.refs[n]++
	}
}

// unpin drops one reference to n; a node left without references leaves
// the tree, and so, in turn, do ancestors left without any.
func (x *prefixIndex) unpin(n int32) {
	for n != noNode {
		x.refs[n]--
		if x.refs[n] > 0 {
			return
		}
		x.unlink(n)
		x.freeNodes = append(x.freeNodes, n)
		x.live--
		n = x.parent[n]
	}
}

// unlink takes n out of its bucket.
func (x *prefixIndex) unlink(n int32) {
	k := x.key[n]
	head := x.buckets[k]
	if head == n {
		if next := x.nextInBucket[n]; next == noNode {
			delete(x.buckets, k)
		} else {
			x.buckets[k] = next
		}
		return
	}
	for p := head; p != noNode; p = x.nextInBucket[p] {
		if x.nextInBucket[p] == n {
			x.nextInBucket[p] = x.nextInBucket[n]
			return
		}
	}
}

// head is the newest block of the group in slot attached to n, or noBlock.
func (x *prefixIndex) head(n int32, slot int) int32 {
	return x.heads[int(n)*len(x.groups)+slot]
}

// attach records that block b of g holds n's content: b becomes a
// prefix-cache hit for n (the newest, so the one found first).
func (x *prefixIndex) attach(n int32, g *group, b int32) {
	h := &x.heads[int(n)*len(x.groups)+g.slot]
	g.nextSame[b], *h = *h, b
	g.node[b] = n
	x.refs[n]++
}

// detach evicts block b of g from the prefix cache (vLLM
// BlockPool._maybe_evict_cached_block): it no longer serves hits, and its
// node loses a reference.
func (x *prefixIndex) detach(g *group, b int32) {
	n := g.node[b]
	h := &x.heads[int(n)*len(x.groups)+g.slot]
	if *h == b {
		*h = g.nextSame[b]
	} else {
		for p := *h; p != noBlock; p = g.nextSame[p] {
			if g.nextSame[p] == b {
				g.nextSame[p] = g.nextSame[b]
				break
			}
		}
	}
	g.node[b], g.nextSame[b] = noNode, noBlock
	x.unpin(n)
}

// walk appends to path the nodes of tokens' first full blocks, from the
// root, until one is not in the tree or maxBlocks are found.
func (x *prefixIndex) walk(tokens []int32, extra []byte, maxBlocks int, path []int32) []int32 {
	b, parent := x.blockSize, int32(noNode)
	for j := range maxBlocks {
		n, _ := x.find(parent, tokens[j*b:j*b+b], extra)
		if n == noNode {
			break
		}
		path = append(path, n)
		parent = n
	}
	return path
}

// reset empties the tree; the caller has detached every block and no
// sequence pins a node.
func (x *prefixIndex) reset() {
	*x = prefixIndex{id: x.id, blockSize: x.blockSize, groups: x.groups, hash: x.hash, buckets: make(map[uint64]int32)}
}
