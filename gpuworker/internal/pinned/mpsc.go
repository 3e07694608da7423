package pinned

import (
	"sync/atomic"

	"golang.org/x/sys/cpu"
)

// mpscQueue is an unbounded lock-free FIFO for many producers and one
// consumer: Dmitry Vyukov's intrusive MPSC node queue
// (https://www.1024cores.net/home/lock-free-algorithms/queues/intrusive-mpsc-node-based-queue).
// push is one atomic swap and one atomic store; pop, on the consumer only,
// one atomic load. Make one with newMPSCQueue.
//
// A push that has swapped the tail but not yet linked its node is not seen by
// pop until it links; a producer that then wakes a parked consumer
// (the mailbox) loses nothing, since it links before it checks whether the
// consumer is parked.
type mpscQueue struct {
	head *mpscNode // the consumer's: the last node popped (or the stub)
	_    cpu.CacheLinePad
	tail atomic.Pointer[mpscNode] // the producers': the last node pushed
	_    cpu.CacheLinePad
}

type mpscNode struct {
	next atomic.Pointer[mpscNode]
	msg  any
}

func newMPSCQueue() *mpscQueue {
	q := &mpscQueue{head: &mpscNode{}}
	q.tail.Store(q.head)
	return q
}

// push appends msg; any goroutine may call it.
func (q *mpscQueue) push(msg any) {
	n := &mpscNode{msg: msg}
	q.tail.Swap(n).next.Store(n)
}

// pop removes the oldest message; false when the queue is empty. Consumer
// only.
func (q *mpscQueue) pop() (any, bool) {
	next := q.head.next.Load()
	if next == nil {
		return nil, false
	}
	q.head = next
	msg := next.msg
	next.msg = nil // the node stays as the new stub; let msg go
	return msg, true
}

// empty reports whether pop would find nothing. Consumer only.
func (q *mpscQueue) empty() bool { return q.head.next.Load() == nil }
