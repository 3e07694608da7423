package pinned

import (
	"runtime"
	"testing"
)

// ThreadID is the same each time on one locked goroutine, and differs
// between two goroutines locked to their own threads at the same time.
func TestThreadIDNamesTheLockedThread(t *testing.T) {
	ids := make(chan [2]int, 2)
	both := make(chan struct{})
	for range 2 {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			ids <- [2]int{ThreadID(), ThreadID()}
			<-both // stay locked until both have read their ids
		}()
	}
	a, b := <-ids, <-ids
	close(both)
	if a[0] != a[1] || b[0] != b[1] || a[0] == b[0] || a[0] <= 0 || b[0] <= 0 {
		t.Fatalf("ids %v and %v: want one positive id per thread, the same twice, different between threads", a, b)
	}
}

// A Dispatcher records its pinned thread: OnPinnedThread is true in a
// function scheduled on it and false elsewhere, and ThreadIDs holds that
// thread alone.
func TestDispatcherKnowsItsThread(t *testing.T) {
	d := New(0, DefaultSpin)
	defer d.Stop()
	type seen struct {
		on  bool
		tid int
		ids []int
	}
	got := make(chan seen, 1)
	d.Schedule(func() { got <- seen{d.OnPinnedThread(), ThreadID(), d.ThreadIDs()} })
	s := <-got
	if !s.on || len(s.ids) != 1 || s.ids[0] != s.tid {
		t.Fatalf("on the pinned goroutine: OnPinnedThread %v, ThreadIDs %v, thread %d; want true, [%d]", s.on, s.ids, s.tid, s.tid)
	}
	if d.OnPinnedThread() {
		t.Fatal("OnPinnedThread is true off the pinned goroutine")
	}
}

// BenchmarkRecordThread is the cost of the dispatcher's thread record (on
// Linux a gettid system call, and a map write), made once per wake-up from
// parking.
func BenchmarkRecordThread(b *testing.B) {
	threads := make(map[int]struct{}, 1)
	for b.Loop() {
		threads[ThreadID()] = struct{}{}
	}
}
