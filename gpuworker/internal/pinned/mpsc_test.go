package pinned

import (
	"sync"
	"testing"
)

// Every message pushed by concurrent producers is popped exactly once, and
// each producer's messages come out in the order it pushed them.
func TestMPSCQueueDeliversEveryMessageOnceInOrder(t *testing.T) {
	const producers, each = 8, 10000
	q := newMPSCQueue()
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				q.push([2]int{p, i})
			}
		}()
	}
	next := make([]int, producers)
	for got := 0; got < producers*each; {
		msg, ok := q.pop()
		if !ok {
			continue // a push may be half done; it links soon
		}
		m := msg.([2]int)
		if m[1] != next[m[0]] {
			t.Fatalf("producer %d: popped message %d, want %d", m[0], m[1], next[m[0]])
		}
		next[m[0]]++
		got++
	}
	wg.Wait()
	if _, ok := q.pop(); ok || !q.empty() {
		t.Fatal("the queue is not empty after every message was popped")
	}
}
