package bench

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Budget bounds one measurement: Ops operations in all when Duration is 0;
// otherwise as many as fit in Duration, and at most Ops when Ops > 0.
type Budget struct {
	Ops      int
	Duration time.Duration
}

// valid reports whether b allows at least one operation.
func (b Budget) valid() bool { return b.Ops > 0 || b.Duration > 0 }

// perClient is the most operations each of clients may make, and the room to
// preallocate for their durations.
func (b Budget) perClient(clients int) (limit, prealloc int) {
	if b.Ops > 0 {
		limit = (b.Ops + clients - 1) / clients
	}
	if b.Duration == 0 {
		return limit, limit
	}
	prealloc = max(1<<16/clients, 64)
	if limit > 0 {
		prealloc = min(prealloc, limit)
	}
	return limit, prealloc
}

// Drive makes operations with op from clients goroutines (on the calling
// goroutine itself when clients is 1, so a caller on a locked thread measures
// on that thread) until the budget is spent, recording each operation's
// duration, and summarises them. All clients start together; the wall time
// runs from their start to the last one's end. The first error stops every
// client and is returned, with the summary of what was done.
func Drive(clients int, b Budget, op func() error) (Summary, error) {
	if clients < 1 || !b.valid() {
		return Summary{}, errors.New("bench: drive needs at least one client and a budget of operations or time")
	}
	limit, prealloc := b.perClient(clients)
	if clients == 1 {
		start := time.Now()
		d, err := driveOne(op, start, b.Duration, limit, make([]time.Duration, 0, prealloc), nil)
		return Summarize(d, time.Since(start)), err
	}
	var (
		wg      sync.WaitGroup
		stop    atomic.Bool
		errOnce sync.Once
		first   error
		begin   = make(chan struct{})
		results = make([][]time.Duration, clients)
		start   time.Time
	)
	for i := range clients {
		buf := make([]time.Duration, 0, prealloc)
		wg.Go(func() {
			<-begin
			d, err := driveOne(op, start, b.Duration, limit, buf, &stop)
			results[i] = d
			if err != nil {
				errOnce.Do(func() { first = err })
				stop.Store(true)
			}
		})
	}
	start = time.Now()
	close(begin)
	wg.Wait()
	elapsed := time.Since(start)
	n := 0
	for _, r := range results {
		n += len(r)
	}
	all := make([]time.Duration, 0, n)
	for _, r := range results {
		all = append(all, r...)
	}
	return Summarize(all, elapsed), first
}

// driveOne is one client: it makes operations until limit (when > 0) or the
// deadline start+dur (when dur > 0) or stop, appending each duration to d.
func driveOne(op func() error, start time.Time, dur time.Duration, limit int, d []time.Duration, stop *atomic.Bool) ([]time.Duration, error) {
	deadline := start.Add(dur)
	for limit == 0 || len(d) < limit {
		if stop != nil && stop.Load() {
			break
		}
		t0 := time.Now()
		err := op()
		t1 := time.Now()
		if err != nil {
			return d, err
		}
		d = append(d, t1.Sub(t0))
		if dur > 0 && !t1.Before(deadline) {
			break
		}
	}
	return d, nil
}
