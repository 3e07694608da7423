package kvcache

import "fmt"

// Check verifies the pool's invariants and returns the first one broken
// (wrapping ErrInvariant), or nil. It walks everything: for tests and for
// an embedder's debug mode, not for every step. Per paged group: a block's
// reference count equals the references to it from sequences' tables (so
// no block is held twice unless shared); the free queue holds exactly the
// unreferenced blocks, once each; free + cached + used = total; the null
// block is never referenced, queued or cached; a full block of a sequence
// is cached under the node of that sequence's prefix, and a cached
// block's node is found again by its key. Per prefix cache: every node's
// key is its hash, it is in its key's bucket, its reference count equals
// its attached blocks, children and pinning sequences, and no two nodes
// hold the same content. Per state group: every slot is free or held by
// exactly one sequence.
func (p *Pool) Check() error {
	for i := range p.groups {
		g := &p.groups[i]
		var err error
		if g.cfg.Kind.paged() {
			err = p.checkPaged(i)
		} else {
			err = p.checkSlots(i)
		}
		if err != nil {
			return err
		}
	}
	for _, x := range p.indexes {
		if err := p.checkIndex(x); err != nil {
			return err
		}
	}
	for id, s := range p.seqs {
		if err := p.checkSequence(id, s); err != nil {
			return err
		}
	}
	return nil
}

// checkPaged checks group i's references, free queue, counts and
// attachments.
func (p *Pool) checkPaged(i int) error {
	g := &p.groups[i]
	n := g.cfg.Blocks
	want := make([]int32, n)
	for _, s := range p.seqs {
		for _, b := range s.tables[i] {
			if b < 0 || int(b) >= n {
				return invariantf("group %d: block id %d out of range", i, b)
			}
			want[b]++
		}
	}
	if g.ref[NullBlock] != 0 || g.queue.queued(NullBlock) || g.node[NullBlock] != noNode {
		return invariantf("group %d: the null block is referenced, queued or cached", i)
	}
	used, cached := 0, 0
	for b := 1; b < n; b++ {
		if g.ref[b] != want[b] {
			return invariantf("group %d: block %d has ref %d, %d tables hold it", i, b, g.ref[b], want[b])
		}
		if (g.ref[b] == 0) != g.queue.queued(int32(b)) {
			return invariantf("group %d: block %d has ref %d but queued=%v", i, b, g.ref[b], g.queue.queued(int32(b)))
		}
		if g.ref[b] > 0 {
			used++
		} else if g.node[b] != noNode {
			cached++
		}
		if g.node[b] != noNode && g.idx == nil {
			return invariantf("group %d: block %d is cached without a prefix cache", i, b)
		}
	}
	if err := g.checkQueue(i); err != nil {
		return err
	}
	c := g.counts()
	if c.Used != used || c.Cached != cached || c.Free+c.Cached+c.Used != c.Total || c.Total != n-1 {
		return invariantf("group %d: counts %+v, found used %d cached %d of %d", i, c, used, cached, n-1)
	}
	return nil
}

// checkQueue walks group i's free queue: each block once, links
// consistent, length as counted.
func (g *group) checkQueue(i int) error {
	q := &g.queue
	s := q.sentinel()
	seen := make([]bool, len(q.prev))
	count := 0
	for b := q.next[s]; b != s; b = q.next[b] {
		if b < 0 || b >= s || seen[b] {
			return invariantf("group %d: free queue revisits or leaves the blocks at %d", i, b)
		}
		if q.next[q.prev[b]] != b {
			return invariantf("group %d: free queue links broken at block %d", i, b)
		}
		seen[b] = true
		count++
	}
	if count != q.len {
		return invariantf("group %d: free queue holds %d blocks, counted %d", i, count, q.len)
	}
	return nil
}

// checkSlots checks that state group i's slots are each free or held by
// one sequence.
func (p *Pool) checkSlots(i int) error {
	g := &p.groups[i]
	owner := make([]int, g.cfg.Blocks)
	mark := func(slot int32, what string) error {
		if slot < 0 || int(slot) >= len(owner) {
			return invariantf("group %d: %s slot %d out of range", i, what, slot)
		}
		if owner[slot]++; owner[slot] > 1 {
			return invariantf("group %d: slot %d is held twice (%s)", i, slot, what)
		}
		return nil
	}
	for _, slot := range g.freeSlots {
		if err := mark(slot, "free"); err != nil {
			return err
		}
	}
	for _, s := range p.seqs {
		if len(s.tables[i]) != 1 {
			return invariantf("group %d: a sequence holds %d slots", i, len(s.tables[i]))
		}
		if err := mark(s.tables[i][0], "sequence"); err != nil {
			return err
		}
	}
	for slot, o := range owner {
		if o != 1 {
			return invariantf("group %d: slot %d is neither free nor held", i, slot)
		}
	}
	return nil
}

// checkIndex checks a prefix cache's nodes against their keys, buckets,
// references and contents.
func (p *Pool) checkIndex(x *prefixIndex) error {
	dead := make([]bool, len(x.key))
	for _, n := range x.freeNodes {
		dead[n] = true
	}
	refs := make([]int32, len(x.key))
	for n := range x.key {
		if !dead[n] && x.parent[n] != noNode {
			refs[x.parent[n]]++
		}
	}
	for _, s := range p.seqs {
		if n := s.last[x.id]; n != noNode {
			refs[n]++
		}
	}
	for slot, gi := range x.groups {
		g := &p.groups[gi]
		for n := range x.key {
			count := 0
			for b := x.heads[n*len(x.groups)+slot]; b != noBlock; b = g.nextSame[b] {
				if g.node[b] != int32(n) || count > g.cfg.Blocks {
					return invariantf("group %d: node %d's chain holds block %d of node %d", gi, n, b, g.node[b])
				}
				count++
			}
			refs[n] += int32(count)
		}
		attached := 0
		for b := range g.node {
			if g.node[b] != noNode {
				attached++
			}
		}
		total := 0
		for n := range x.key {
			for b := x.heads[n*len(x.groups)+slot]; b != noBlock; b = g.nextSame[b] {
				total++
			}
		}
		if attached != total {
			return invariantf("group %d: %d blocks cached, %d in node chains", gi, attached, total)
		}
	}
	return x.checkNodes(dead, refs)
}

// checkNodes checks each live node's references, key, bucket and
// uniqueness.
func (x *prefixIndex) checkNodes(dead []bool, refs []int32) error {
	live, inBuckets := 0, 0
	seen := make(map[string]int)
	for n := range x.key {
		if dead[n] {
			if refs[n] != 0 {
				return invariantf("index %d: dead node %d is referred to %d times", x.id, n, refs[n])
			}
			continue
		}
		live++
		if x.refs[n] != refs[n] || refs[n] == 0 {
			return invariantf("index %d: node %d has refs %d, found %d", x.id, n, x.refs[n], refs[n])
		}
		parent := x.parent[n]
		if parent != noNode && (int(parent) >= len(dead) || dead[parent]) {
			return invariantf("index %d: node %d's parent %d is dead", x.id, n, parent)
		}
		var extra []byte
		if parent == noNode {
			extra = []byte(x.extra[n])
		}
		if k := x.hash(x.parentKey(parent), x.nodeTokens(int32(n)), extra); k != x.key[n] {
			return invariantf("index %d: node %d has key %#x, its content hashes to %#x", x.id, n, x.key[n], k)
		}
		if found, _ := x.find(parent, x.nodeTokens(int32(n)), extra); found != int32(n) {
			return invariantf("index %d: node %d is not found by its key (found %d)", x.id, n, found)
		}
		content := fmt.Sprint(parent, x.extra[n], x.nodeTokens(int32(n)))
		if other, dup := seen[content]; dup {
			return invariantf("index %d: nodes %d and %d hold the same content", x.id, other, n)
		}
		seen[content] = n
	}
	for _, head := range x.buckets {
		for n := head; n != noNode; n = x.nextInBucket[n] {
			if dead[n] || inBuckets > len(x.key) {
				return invariantf("index %d: bucket holds dead node %d", x.id, n)
			}
			inBuckets++
		}
	}
	if live != x.live || inBuckets != live {
		return invariantf("index %d: %d live nodes, counted %d, %d in buckets", x.id, live, x.live, inBuckets)
	}
	return nil
}

// checkSequence checks one sequence's tables against its length, and its
// full blocks against its path in each prefix cache.
func (p *Pool) checkSequence(id SeqID, s *sequence) error {
	for i := range p.groups {
		g := &p.groups[i]
		t := s.tables[i]
		if !g.cfg.Kind.paged() {
			continue
		}
		if len(t) != g.blocksFor(s.tokens) {
			return invariantf("sequence %d: group %d holds %d blocks for %d tokens", id, i, len(t), s.tokens)
		}
		for j, b := range t {
			if b == NullBlock && (g.cfg.Kind == FullAttention || j >= g.skippedBlocks(s.tokens) || (j > 0 && t[j-1] != NullBlock)) {
				return invariantf("sequence %d: group %d has a null block at %d, inside its window or after a block", id, i, j)
			}
		}
	}
	if s.pending < 0 || s.pending > s.tokens {
		return invariantf("sequence %d: %d pending tokens of %d", id, s.pending, s.tokens)
	}
	if p.indexes == nil {
		return nil
	}
	if s.tailStart != p.tailStart(s.known()) || len(s.tail) != s.known()-s.tailStart {
		return invariantf("sequence %d: tail of %d tokens from %d for %d known tokens", id, len(s.tail), s.tailStart, s.known())
	}
	for _, x := range p.indexes {
		if err := p.checkPath(id, s, x); err != nil {
			return err
		}
	}
	return nil
}

// checkPath checks that a sequence's full blocks of index x are cached
// under the nodes of its path, and its partial block under none.
func (p *Pool) checkPath(id SeqID, s *sequence, x *prefixIndex) error {
	full := s.known() / x.blockSize
	path := make([]int32, full)
	n := s.last[x.id]
	for j := full - 1; j >= 0; j-- {
		if n == noNode {
			return invariantf("sequence %d: index %d path ends above block %d", id, x.id, j)
		}
		path[j], n = n, x.parent[n]
	}
	if n != noNode {
		return invariantf("sequence %d: index %d path is deeper than its %d full blocks", id, x.id, full)
	}
	for _, gi := range x.groups {
		g := &p.groups[gi]
		for j, b := range s.tables[gi] {
			want := int32(noNode)
			if j < full {
				want = path[j]
			}
			if b != NullBlock && g.node[b] != want {
				return invariantf("sequence %d: group %d block %d at %d is cached under node %d, its path has %d", id, gi, b, j, g.node[b], want)
			}
		}
	}
	return nil
}
