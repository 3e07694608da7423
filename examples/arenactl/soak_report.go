package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// maxBreaksKept is how many broken invariants a soak report keeps word for
// word (it counts them all).
const maxBreaksKept = 20

// soakReport is what a soak has counted so far; its methods are safe for
// concurrent use.
type soakReport struct {
	start   time.Time
	clients int
	ops     atomic.Int64
	cycle   atomic.Int64 // the cycle under way
	cycles  atomic.Int64 // cycles done

	mu          sync.Mutex
	byOp        map[soakOp]int64
	errs        map[string]int64
	breaks      []string
	breakCount  int
	ledgerBytes int64
	backendB    int64
	closes      []time.Duration
}

func newSoakReport(clients int) *soakReport {
	return &soakReport{start: time.Now(), clients: clients, byOp: map[soakOp]int64{}, errs: map[string]int64{}, backendB: -1}
}

// errKind names the kind of a request's error for the counts.
func errKind(err error) string {
	kinds := []struct {
		err  error
		name string
	}{
		{gpuarena.ErrClosed, "closed"}, {gpuarena.ErrReleased, "released"},
		{gpuarena.ErrSlabExhausted, "slab exhausted"}, {gpuarena.ErrSlabAbsent, "slab absent"},
		{gpuworker.ErrOutOfRange, "out of range"}, {gpuarena.ErrArenaBuilt, "arena built"},
		{context.Canceled, "canceled"}, {context.DeadlineExceeded, "deadline exceeded"},
		{gpuarena.ErrOutOfMemory, "out of memory"}, {gpuarena.ErrBackendPanic, "backend panic"},
		{arena.ErrInvalidCarve, "invalid carve"},
	}
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	return "other"
}

// count records one request.
func (r *soakReport) count(op soakOp, err error) {
	r.ops.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byOp[op]++
	if err != nil {
		r.errs[errKind(err)]++
	}
}

// broke records a broken invariant.
func (r *soakReport) broke(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.breakCount++
	if len(r.breaks) < maxBreaksKept {
		r.breaks = append(r.breaks, what)
	}
}

// broken returns the broken invariants kept, and how many more there were.
func (r *soakReport) broken() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.breaks)
	if more := r.breakCount - len(r.breaks); more > 0 {
		out = append(out, fmt.Sprintf("and %d more", more))
	}
	return out
}

// ledger records the last ledger read.
func (r *soakReport) ledger(bytes, backend int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ledgerBytes, r.backendB = bytes, backend
}

// closed records how long one Close under load took.
func (r *soakReport) closed(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closes = append(r.closes, d)
}

// errorsText is the error counts by kind, most frequent first.
func (r *soakReport) errorsText() string {
	type kv struct {
		k string
		n int64
	}
	var all []kv
	for k, n := range r.errs {
		all = append(all, kv{k, n})
	}
	if len(all) == 0 {
		return "none"
	}
	slices.SortFunc(all, func(a, b kv) int {
		if a.n != b.n {
			return int(b.n - a.n)
		}
		return strings.Compare(a.k, b.k)
	})
	parts := make([]string, len(all))
	for i, e := range all {
		parts[i] = fmt.Sprintf("%s %d", e.k, e.n)
	}
	return strings.Join(parts, ", ")
}

// closeStats are the longest, mean and last Close times.
func (r *soakReport) closeStats() (longest, mean, last time.Duration) {
	if len(r.closes) == 0 {
		return 0, 0, 0
	}
	var sum time.Duration
	for _, d := range r.closes {
		sum += d
		longest = max(longest, d)
	}
	return longest, sum / time.Duration(len(r.closes)), r.closes[len(r.closes)-1]
}

// writeProgress prints one progress line; it reads the ledger of m, the
// manager of the cycle under way (nil between cycles).
func (r *soakReport) writeProgress(w io.Writer, m *gpuarena.Manager) {
	ledger := "-"
	if m != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		l, err := m.Ledger(ctx)
		cancel()
		if err == nil {
			r.ledger(l.Counters.CurrentBytes, l.BackendBytesInUse)
			ledger = fmt.Sprintf("%s (backend %s)", human(l.Counters.CurrentBytes), backendText(l.BackendBytesInUse))
		}
	}
	elapsed := time.Since(r.start)
	ops := r.ops.Load()
	r.mu.Lock()
	defer r.mu.Unlock()
	longest, _, _ := r.closeStats()
	fmt.Fprintf(w, "[%7s] cycle %d: %d ops (%.0f/s); errors: %s; ledger %s; goroutines %d; closes %d (longest %s); invariants broken %d\n",
		elapsed.Round(time.Second), r.cycle.Load(), ops, float64(ops)/elapsed.Seconds(), r.errorsText(), ledger,
		runtime.NumGoroutine(), len(r.closes), longest.Round(time.Microsecond), r.breakCount)
}

// backendText is the backend's bytes in use, or "n/a" where it cannot tell.
func backendText(n int64) string {
	if n < 0 {
		return "n/a"
	}
	return human(n)
}

// writeSummary prints the run's totals.
func (r *soakReport) writeSummary(w io.Writer, s *soak) {
	elapsed := time.Since(r.start)
	ops := r.ops.Load()
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(w, "\nsoak %s on %s: %d clients, %d cycles of up to %s, %s\n\n", s.plan.ModelType, s.backend, s.clients, r.cycles.Load(), s.cycle, elapsed.Round(time.Millisecond))
	tw := newTable(w)
	row(tw, "operations", fmt.Sprintf("%d (%.0f/s)", ops, float64(ops)/elapsed.Seconds()))
	var byOp []string
	for _, wgt := range soakWeights {
		byOp = append(byOp, fmt.Sprintf("%s %d", wgt.op, r.byOp[wgt.op]))
	}
	row(tw, "by operation", strings.Join(byOp, ", "))
	row(tw, "errors by kind", r.errorsText())
	row(tw, "ledger (last read)", fmt.Sprintf("%s, backend %s", bytesAndHuman(r.ledgerBytes), backendText(r.backendB)))
	row(tw, "goroutines now", runtime.NumGoroutine())
	longest, mean, last := r.closeStats()
	row(tw, "close under load", fmt.Sprintf("%d closes with %d clients sending: longest %s, mean %s, last %s",
		len(r.closes), r.clients, longest.Round(time.Microsecond), mean.Round(time.Microsecond), last.Round(time.Microsecond)))
	tw.Flush()
	if r.breakCount == 0 {
		fmt.Fprintln(w, "\ninvariants: all hold")
		return
	}
	fmt.Fprintf(w, "\ninvariants BROKEN (%d):\n", r.breakCount)
	for _, b := range r.breaks {
		fmt.Fprintf(w, "  - %s\n", b)
	}
}
