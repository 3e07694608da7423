package bench

// MetricReporter is what ReportMetrics needs of a *testing.B.
type MetricReporter interface {
	ReportMetric(n float64, unit string)
}

// ReportMetrics reports s on a benchmark: ns/op is the mean latency of one
// operation (overriding the testing package's wall time per iteration, which
// under contention is the inverse of the throughput), with p50-ns, p99-ns and
// ops/s beside it. prefix, when not empty, names a second measurement of the
// same iteration ("release-"): its metrics are prefix+"ns", prefix+"p50-ns",
// prefix+"p99-ns" and ns/op is left alone.
func ReportMetrics(b MetricReporter, s Summary, prefix string) {
	mean := "ns/op"
	if prefix != "" {
		mean = prefix + "ns"
	}
	b.ReportMetric(float64(s.Mean.Nanoseconds()), mean)
	b.ReportMetric(float64(s.P50.Nanoseconds()), prefix+"p50-ns")
	b.ReportMetric(float64(s.P99.Nanoseconds()), prefix+"p99-ns")
	if prefix == "" {
		b.ReportMetric(s.OpsPerSec, "ops/s")
	}
}
