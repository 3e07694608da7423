package loadgen

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// reportKeys are the keys of Report's JSON form, sorted.
var reportKeys = []string{"clients", "completed", "cut", "elapsed_ms", "errors", "failed", "itl_p50_us", "itl_p99_us", "itl_samples",
	"output_tokens", "output_tokens_per_s", "preemptions", "requests", "requests_per_s", "ttft_p50_ms", "ttft_p99_ms", "ttft_samples"}

// Report's JSON is snake_case with the units in the keys, its errors a
// list (empty, not null), and it reads back to the same Report.
func TestLoadgenReportJSON(t *testing.T) {
	rep := Report{Clients: 4, Requests: 12, Completed: 12, Elapsed: 1500 * time.Millisecond, OutputTokens: 900,
		RequestsPerSecond: 8, OutputTokensPerSecond: 600,
		TTFT:        Percentiles{P50: 5994818, P99: 12 * time.Millisecond, Samples: 12},
		ITL:         Percentiles{P50: 800 * time.Microsecond, P99: 1500, Samples: 888},
		Preemptions: 3}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, reportKeys) {
		t.Errorf("keys %v, want %v", keys, reportKeys)
	}
	for k, want := range map[string]any{"clients": 4.0, "requests": 12.0, "elapsed_ms": 1500.0, "output_tokens_per_s": 600.0,
		"ttft_p50_ms": 5.994818, "ttft_p99_ms": 12.0, "itl_p50_us": 800.0, "itl_p99_us": 1.5, "itl_samples": 888.0, "preemptions": 3.0} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
	if errs, ok := got["errors"].([]any); !ok || len(errs) != 0 || !strings.Contains(string(b), `"errors":[]`) {
		t.Errorf("errors %#v in %s, want []", got["errors"], b)
	}

	rep.Failed, rep.Completed, rep.Errors = 2, 10, []string{"status 400: too long", "stream ended without [DONE]"}
	b, err = json.Marshal(&rep)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, rep) {
		t.Errorf("read back %+v, want %+v", back, rep)
	}
}
