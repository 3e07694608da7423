package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

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

// "server load" starts the server in-process, runs the load, shuts the
// server down and checks the ledger and the goroutines.
func TestLoadCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := execute(context.Background(), []string{"load", "--config", "../configs/qwen3-0.6b.json", "--max-batch-tokens", "512", "--max-seq-len", "512",
		"--kv-blocks", "64", "--log-level", "error", "--clients", "4", "--requests", "12", "--seed", "3", "--json"}, &stdout, &stderr, nil)
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	var out struct {
		Report                  loadgen.Report `json:"report"`
		LedgerBytesAfterRelease *int64         `json:"ledger_bytes_after_release"`
		GoroutinesLeft          *string        `json:"goroutines_left"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("%v:\n%s", err, stdout.String())
	}
	if out.Report.Completed != 12 || out.LedgerBytesAfterRelease == nil || *out.LedgerBytesAfterRelease != 0 || out.GoroutinesLeft == nil || *out.GoroutinesLeft != "" {
		t.Errorf("outcome %s", stdout.String())
	}
	if code := execute(context.Background(), []string{"load", "--config", "../configs/qwen3-0.6b.json", "--clients", "0"}, io.Discard, &stderr, nil); code != exitFailure {
		t.Errorf("--clients 0: exit %d, want %d", code, exitFailure)
	}
}
