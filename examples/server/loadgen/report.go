package loadgen

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// Report is what a load run measured. Its JSON form (report_json.go) is
// snake_case with the units in the keys.
type Report struct {
	// Clients and Requests are the config's; Completed the requests whose
	// stream reached [DONE], Failed those that did not before the run's
	// end (Errors keeps the first few, in the order they came), Cut those
	// the run's Duration or context cut.
	Clients, Requests, Completed, Failed, Cut int
	Errors                                    []string
	// Elapsed is the run's wall time.
	Elapsed time.Duration
	// OutputTokens is the completed requests' completion_tokens.
	OutputTokens int
	// RequestsPerSecond and OutputTokensPerSecond are Completed and
	// OutputTokens over Elapsed.
	RequestsPerSecond, OutputTokensPerSecond float64
	// TTFT is the time from sending a request to its first text, ITL
	// between two chunks of text of one stream (completed requests only).
	TTFT, ITL Percentiles
	// Preemptions is the server's PreemptionsMetric's increase over the
	// run.
	Preemptions int64
}

// Percentiles of a latency: nearest-rank p50 and p99, and the samples.
type Percentiles struct {
	P50, P99 time.Duration
	Samples  int
}

// maxErrors is how many errors a Report keeps.
const maxErrors = 5

// add counts one result.
func (r *Report) add(res result) {
	switch {
	case res.err == nil:
		r.Completed++
		r.OutputTokens += res.tokens
	case res.cut:
		r.Cut++
	default:
		r.Failed++
		if len(r.Errors) < maxErrors {
			r.Errors = append(r.Errors, res.err.Error())
		}
	}
}

// RequestsFailedError is Run's error when requests failed: Failed of
// the Sent requests (those completed, failed or cut) and the first
// failure's error. Requests the run's Duration cut are not failures.
type RequestsFailedError struct {
	Failed, Sent int
	First        string
}

func (e *RequestsFailedError) Error() string {
	return fmt.Sprintf("loadgen: %d of %d requests failed; the first: %s", e.Failed, e.Sent, e.First)
}

// failure is r's *RequestsFailedError, or nil when no request failed.
func (r *Report) failure() error {
	if r.Failed == 0 {
		return nil
	}
	return &RequestsFailedError{Failed: r.Failed, Sent: r.Completed + r.Failed + r.Cut, First: r.Errors[0]}
}

// finish computes the rates and percentiles.
func (r *Report) finish(ttft, itl []time.Duration) {
	if s := r.Elapsed.Seconds(); s > 0 {
		r.RequestsPerSecond = float64(r.Completed) / s
		r.OutputTokensPerSecond = float64(r.OutputTokens) / s
	}
	r.TTFT, r.ITL = percentiles(ttft), percentiles(itl)
}

// percentiles is d's nearest-rank p50 and p99 (d is sorted in place).
func percentiles(d []time.Duration) Percentiles {
	if len(d) == 0 {
		return Percentiles{}
	}
	slices.Sort(d)
	rank := func(p int) time.Duration { return d[max((p*len(d)+99)/100-1, 0)] }
	return Percentiles{P50: rank(50), P99: rank(99), Samples: len(d)}
}

// Write writes r as a few readable lines.
func (r *Report) Write(w io.Writer) {
	fmt.Fprintf(w, "clients %d, requests %d: %d completed, %d failed, %d cut in %v\n", r.Clients, r.Requests, r.Completed, r.Failed, r.Cut, r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "throughput %.1f requests/s, %.0f output tokens/s (%d tokens)\n", r.RequestsPerSecond, r.OutputTokensPerSecond, r.OutputTokens)
	fmt.Fprintf(w, "time to first token p50 %v, p99 %v (%d)\n", r.TTFT.P50.Round(time.Microsecond), r.TTFT.P99.Round(time.Microsecond), r.TTFT.Samples)
	fmt.Fprintf(w, "inter-token latency p50 %v, p99 %v (%d)\n", r.ITL.P50.Round(time.Microsecond), r.ITL.P99.Round(time.Microsecond), r.ITL.Samples)
	fmt.Fprintf(w, "preemptions %d\n", r.Preemptions)
	for _, e := range r.Errors {
		fmt.Fprintf(w, "error: %s\n", e)
	}
}
