package kvcache

// freeQueue is a paged group's unused blocks in eviction order, as vLLM's
// kv_cache_utils.FreeKVCacheBlockQueue: a doubly linked list threaded
// through two arrays indexed by block id, so taking a block out of the
// middle (a prefix-cache hit) is O(1) and nothing is allocated after
// construction. Blocks are taken from the front and given back at the back.
// Index len(prev)−1 is the list's sentinel; a block not in the queue has
// prev = notQueued.
type freeQueue struct {
	prev, next []int32
	len        int
}

// notQueued marks a block that is not in the queue.
const notQueued = -1

// newFreeQueue makes the queue of blocks first … n−1 in id order (vLLM
// starts with the blocks in id order too); blocks below first are never
// queued.
func newFreeQueue(n, first int) freeQueue {
	q := freeQueue{prev: make([]int32, n+1), next: make([]int32, n+1)}
	s := q.sentinel()
	for b := range n {
		q.prev[b], q.next[b] = notQueued, notQueued
	}
	q.prev[s], q.next[s] = s, s
	for b := first; b < n; b++ {
		q.pushBack(int32(b))
	}
	return q
}

func (q *freeQueue) sentinel() int32 { return int32(len(q.prev) - 1) }

// queued reports whether b is in the queue.
func (q *freeQueue) queued(b int32) bool { return q.prev[b] != notQueued }

// pushBack gives b back: it will be taken after every block queued now.
func (q *freeQueue) pushBack(b int32) {
	s := q.sentinel()
	last := q.prev[s]
	q.next[last], q.prev[b], q.next[b], q.prev[s] = b, last, s, b
	q.len++
}

// popFront takes the block queued longest; the queue must not be empty.
func (q *freeQueue) popFront() int32 {
	b := q.next[q.sentinel()]
	q.remove(b)
	return b
}

// remove takes b, which must be queued, out of the queue.
func (q *freeQueue) remove(b int32) {
	p, n := q.prev[b], q.next[b]
	q.next[p], q.prev[n] = n, p
	q.prev[b], q.next[b] = notQueued, notQueued
	q.len--
}
