package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/gpuarena/gpuarena/examples/server/loadgen"
)

// The load generator against an in-process server with a KV cache too
// small for its clients: every request completes, the tokens and latency
// samples add up, the preemptions are the server's counter, and the
// shutdown leaves nothing (testServer.stop and goleak).
func TestLoadgenAgainstServer(t *testing.T) {
	ts := startTestServer(t, 40) // 40 blocks of 16 tokens: about three requests at once
	mix := loadgen.Mix{PromptTokens: [2]int{32, 200}, OutputTokens: [2]int{32, 200}, SharedPrefixes: 2, PrefixTokens: 16, SharedFraction: 0.5}
	rep, err := loadgen.Run(context.Background(), loadgen.Config{URL: ts.url, Clients: 8, Requests: 24, Duration: time.Minute, Seed: 7, Mix: mix})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Completed != 24 || rep.Failed != 0 || rep.Cut != 0 {
		t.Fatalf("report %+v: want 24 completed", rep)
	}
	if rep.OutputTokens < 24*32 || rep.OutputTokens > 24*200 || rep.OutputTokensPerSecond <= 0 || rep.RequestsPerSecond <= 0 {
		t.Errorf("%d output tokens at %.0f/s, %.1f requests/s; want 768 to 4800 tokens", rep.OutputTokens, rep.OutputTokensPerSecond, rep.RequestsPerSecond)
	}
	// One text chunk per token: the first is timed from the request, the
	// others from the chunk before.
	if rep.TTFT.Samples != 24 || rep.ITL.Samples != rep.OutputTokens-24 || rep.TTFT.P50 <= 0 || rep.TTFT.P99 < rep.TTFT.P50 || rep.ITL.P99 < rep.ITL.P50 {
		t.Errorf("TTFT %+v, ITL %+v for %d tokens", rep.TTFT, rep.ITL, rep.OutputTokens)
	}
	var m dto.Metric
	if err := ts.metrics.preemptions.Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := int64(m.GetCounter().GetValue()); rep.Preemptions != got || got == 0 {
		t.Errorf("report has %d preemptions, the server counted %d; want some with 40 blocks for 8 clients", rep.Preemptions, got)
	}
	if seqs, used := ts.kvClean(t); seqs != 0 || used != 0 {
		t.Errorf("after the load: %d sequences, %d blocks used", seqs, used)
	}

	again, err := loadgen.Run(context.Background(), loadgen.Config{URL: ts.url, Clients: 8, Requests: 24, Duration: time.Minute, Seed: 7, Mix: mix})
	if err != nil {
		t.Fatal(err)
	}
	if again.OutputTokens != rep.OutputTokens {
		t.Errorf("the same seed gave %d output tokens, then %d", rep.OutputTokens, again.OutputTokens)
	}
}

// loadArgs are "server load"'s arguments for an in-process server with
// small limits (max_seq_len 512, 64 KV blocks), then extra.
func loadArgs(extra ...string) []string {
	return append([]string{"load", "--config", "../configs/qwen3-0.6b.json", "--max-batch-tokens", "512", "--max-seq-len", "512",
		"--kv-blocks", "64", "--log-level", "error"}, extra...)
}

// loadReportKeys are the keys of --json's report, sorted.
var loadReportKeys = []string{"clients", "completed", "cut", "elapsed_ms", "errors", "failed", "itl_p50_us", "itl_p99_us", "itl_samples",
	"output_tokens", "output_tokens_per_s", "preemptions", "requests", "requests_per_s", "ttft_p50_ms", "ttft_p99_ms", "ttft_samples"}

// "server load" starts the server in-process, runs the load, shuts the
// server down and checks the ledger and the goroutines; --json is
// snake_case with units in the keys, the errors and goroutines left as
// lists and the ledger's bytes as a number.
func TestLoadCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := execute(context.Background(), loadArgs("--clients", "4", "--requests", "12", "--seed", "3", "--json"), &stdout, &stderr, nil)
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	var raw struct {
		Report        map[string]any `json:"report"`
		AfterShutdown map[string]any `json:"after_shutdown"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &raw); err != nil {
		t.Fatalf("%v:\n%s", err, stdout.String())
	}
	if keys := slices.Sorted(maps.Keys(raw.Report)); !slices.Equal(keys, loadReportKeys) {
		t.Errorf("report keys %v, want %v", keys, loadReportKeys)
	}
	errs, errsOK := raw.Report["errors"].([]any)
	left, leftOK := raw.AfterShutdown["goroutines_left"].([]any)
	ledger, ledgerOK := raw.AfterShutdown["ledger_bytes_after_release"].(float64)
	if !errsOK || len(errs) != 0 || !leftOK || len(left) != 0 || !ledgerOK || ledger != 0 || len(raw.AfterShutdown) != 2 {
		t.Errorf("errors %#v, after_shutdown %#v: want [], and 0 B and []", raw.Report["errors"], raw.AfterShutdown)
	}
	var out struct {
		Report loadgen.Report `json:"report"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if r := out.Report; r.Completed != 12 || r.Requests != 12 || r.Clients != 4 || r.TTFT.Samples != 12 || r.TTFT.P50 <= 0 || r.ITL.P99 < r.ITL.P50 || r.OutputTokensPerSecond <= 0 {
		t.Errorf("report %+v: want 12 completed with their latencies", r)
	}
	if ms, ok := raw.Report["ttft_p50_ms"].(float64); !ok || ms != float64(out.Report.TTFT.P50)/1e6 || ms > 60e3 {
		t.Errorf("ttft_p50_ms %v for %v", ms, out.Report.TTFT.P50)
	}
}

// A load in which requests fail exits 2 saying how many of how many
// failed and the first error, after the report and the checks; in
// process and with --url.
func TestLoadFailedRequestsExit2(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := execute(context.Background(), loadArgs("--clients", "4", "--requests", "8", "--prompt-tokens", "600,600"), &stdout, &stderr, nil)
	if code != exitFailure || !strings.Contains(stderr.String(), "8 of 8 requests failed; the first: status 400") || !strings.Contains(stderr.String(), "maximum context length is 512") {
		t.Errorf("in process: exit %d, want %d; stderr:\n%s", code, exitFailure, stderr.String())
	}
	if out := stdout.String(); !strings.Contains(out, "0 completed, 8 failed") || !strings.Contains(out, "after the shutdown: ledger 0 B, goroutines left: none") {
		t.Errorf("in process: stdout:\n%s", out)
	}

	ts := startTestServer(t, 64)
	stdout.Reset()
	stderr.Reset()
	code = execute(context.Background(), []string{"load", "--url", ts.url, "--clients", "2", "--requests", "4", "--prompt-tokens", "600,600", "--json"}, &stdout, &stderr, nil)
	var out struct {
		Report loadgen.Report `json:"report"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("%v:\n%s", err, stdout.String())
	}
	if code != exitFailure || !strings.Contains(stderr.String(), "4 of 4 requests failed; the first: status 400") || out.Report.Failed != 4 || len(out.Report.Errors) != 4 {
		t.Errorf("--url: exit %d, report %+v; stderr:\n%s", code, out.Report, stderr.String())
	}
}

// Bad load flags are refused before anything starts, naming the flag,
// its value and what it must be.
func TestLoadRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--clients", "0"}, "--clients 0: must be at least 1"},
		{[]string{"--requests", "0"}, "--requests 0: must be at least 1"},
		{[]string{"--duration", "0s"}, "--duration 0s: must be positive"},
		{[]string{"--prompt-tokens", "10,5"}, "--prompt-tokens 10,5: must be min,max with 1 ≤ min ≤ max"},
		{[]string{"--prompt-tokens", "5"}, "--prompt-tokens 5: must be min,max"},
		{[]string{"--output-tokens", "0,5"}, "--output-tokens 0,5: must be min,max with 1 ≤ min ≤ max"},
		{[]string{"--shared-fraction", "2"}, "--shared-fraction 2: must be in [0, 1]"},
		{[]string{"--shared-prefixes", "0"}, "--shared-prefixes 0: must be at least 1 while a shared fraction is above 0"},
		{[]string{"--prefix-tokens", "17"}, "--prefix-tokens 17: must be 1 to 16, the shortest prompt, while a shared fraction is above 0"},
		{[]string{"--url", "localhost:8080"}, "--url localhost:8080: must be an http:// or https:// URL with a host"},
		{[]string{"--url", "http://127.0.0.1:1"}, "--url drives a running server: --config, --kv-blocks, --max-batch-tokens, --max-seq-len would not reach it; leave them out, or leave out --url to start a server with them"},
	} {
		var stdout, stderr bytes.Buffer
		code := execute(context.Background(), loadArgs(tc.args...), &stdout, &stderr, nil)
		if want := "server: " + tc.want + "\n"; code != exitFailure || stderr.String() != want || stdout.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q alone", tc.args, code, stderr.String(), exitFailure, want)
		}
	}
}

// goroutinesLeft lists each goroutine left past the ones ignored, and an
// empty list when none is.
func TestLoadGoroutinesLeft(t *testing.T) {
	before := goleak.IgnoreCurrent()
	release, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		<-release
	}()
	left := goroutinesLeft(before)
	close(release)
	<-done
	if len(left) != 1 || !strings.HasPrefix(left[0], "Goroutine ") || !strings.Contains(left[0], "TestLoadGoroutinesLeft") || strings.HasSuffix(left[0], "]") {
		t.Errorf("goroutines left %q, want the test's one", left)
	}
	if left := goroutinesLeft(before); left == nil || len(left) != 0 {
		t.Errorf("after it ended: %#v, want an empty list", left)
	}
}
