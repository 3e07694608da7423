package loadgen

import (
	"encoding/json"
	"math"
	"time"
)

// reportJSON is Report's JSON form, in the style of "arenactl run --json":
// snake_case keys with the unit in the name (time to first token in ms,
// inter-token latency in µs, rates per second) and errors as a list,
// empty when there are none.
type reportJSON struct {
	Clients               int      `json:"clients"`
	Requests              int      `json:"requests"`
	Completed             int      `json:"completed"`
	Failed                int      `json:"failed"`
	Cut                   int      `json:"cut"`
	Errors                []string `json:"errors"`
	ElapsedMS             float64  `json:"elapsed_ms"`
	OutputTokens          int      `json:"output_tokens"`
	RequestsPerSecond     float64  `json:"requests_per_s"`
	OutputTokensPerSecond float64  `json:"output_tokens_per_s"`
	TTFTP50MS             float64  `json:"ttft_p50_ms"`
	TTFTP99MS             float64  `json:"ttft_p99_ms"`
	TTFTSamples           int      `json:"ttft_samples"`
	ITLP50US              float64  `json:"itl_p50_us"`
	ITLP99US              float64  `json:"itl_p99_us"`
	ITLSamples            int      `json:"itl_samples"`
	Preemptions           int64    `json:"preemptions"`
}

// durationIn is d in unit (time.Millisecond, time.Microsecond): the
// JSON form's numbers.
func durationIn(d, unit time.Duration) float64 { return float64(d) / float64(unit) }

// durationOf is durationIn's inverse, rounded to the nanosecond.
func durationOf(v float64, unit time.Duration) time.Duration {
	return time.Duration(math.Round(v * float64(unit)))
}

// MarshalJSON writes r's JSON form: clients, requests, completed,
// failed, cut, errors (a list, [] when none), elapsed_ms, output_tokens,
// requests_per_s, output_tokens_per_s, ttft_p50_ms, ttft_p99_ms,
// ttft_samples, itl_p50_us, itl_p99_us, itl_samples, preemptions.
func (r Report) MarshalJSON() ([]byte, error) {
	errs := r.Errors
	if errs == nil {
		errs = []string{}
	}
	return json.Marshal(reportJSON{
		Clients: r.Clients, Requests: r.Requests, Completed: r.Completed, Failed: r.Failed, Cut: r.Cut, Errors: errs,
		ElapsedMS: durationIn(r.Elapsed, time.Millisecond), OutputTokens: r.OutputTokens,
		RequestsPerSecond: r.RequestsPerSecond, OutputTokensPerSecond: r.OutputTokensPerSecond,
		TTFTP50MS: durationIn(r.TTFT.P50, time.Millisecond), TTFTP99MS: durationIn(r.TTFT.P99, time.Millisecond), TTFTSamples: r.TTFT.Samples,
		ITLP50US: durationIn(r.ITL.P50, time.Microsecond), ITLP99US: durationIn(r.ITL.P99, time.Microsecond), ITLSamples: r.ITL.Samples,
		Preemptions: r.Preemptions,
	})
}

// UnmarshalJSON reads what MarshalJSON writes; durations come back to
// the nanosecond. Errors: the decoder's.
func (r *Report) UnmarshalJSON(b []byte) error {
	var j reportJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = Report{
		Clients: j.Clients, Requests: j.Requests, Completed: j.Completed, Failed: j.Failed, Cut: j.Cut, Errors: j.Errors,
		Elapsed: durationOf(j.ElapsedMS, time.Millisecond), OutputTokens: j.OutputTokens,
		RequestsPerSecond: j.RequestsPerSecond, OutputTokensPerSecond: j.OutputTokensPerSecond,
		TTFT:        Percentiles{P50: durationOf(j.TTFTP50MS, time.Millisecond), P99: durationOf(j.TTFTP99MS, time.Millisecond), Samples: j.TTFTSamples},
		ITL:         Percentiles{P50: durationOf(j.ITLP50US, time.Microsecond), P99: durationOf(j.ITLP99US, time.Microsecond), Samples: j.ITLSamples},
		Preemptions: j.Preemptions,
	}
	return nil
}
