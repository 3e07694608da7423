package bench

import (
	"slices"
	"time"
)

// Summary describes one measurement: Ops operations whose durations have
// percentiles P50 and P99 (nearest rank), mean Mean and maximum Max, made in
// Elapsed wall time, that is OpsPerSec operations per second across all
// clients.
type Summary struct {
	Ops       int           `json:"ops"`
	P50       time.Duration `json:"p50_ns"`
	P99       time.Duration `json:"p99_ns"`
	Mean      time.Duration `json:"mean_ns"`
	Max       time.Duration `json:"max_ns"`
	Elapsed   time.Duration `json:"elapsed_ns"`
	OpsPerSec float64       `json:"ops_per_sec"`
}

// Summarize computes the Summary of the per-operation durations d, made in
// elapsed wall time. d is left as it is: the build suite pairs its
// durations by cycle.
func Summarize(d []time.Duration, elapsed time.Duration) Summary {
	s := Summary{Ops: len(d), Elapsed: elapsed}
	if len(d) == 0 {
		return s
	}
	d = slices.Sorted(slices.Values(d))
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	s.P50, s.P99, s.Max = percentile(d, 50), percentile(d, 99), d[len(d)-1]
	s.Mean = sum / time.Duration(len(d))
	if elapsed > 0 {
		s.OpsPerSec = float64(len(d)) / elapsed.Seconds()
	}
	return s
}

// percentile is the nearest-rank p-th percentile of the sorted, non-empty d.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 · n)
	return sorted[max(rank, 1)-1]
}
