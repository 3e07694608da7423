package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// A model that does not fit is refused at start with the fit's
// explanation and exit status 1; nothing is left running.
func TestRefusesWhatDoesNotFit(t *testing.T) {
	var stderr bytes.Buffer
	code := execute(context.Background(), []string{"--config", "../configs/qwen3-0.6b.json", "--gpu-memory-utilization", "0.003",
		"--listen", "127.0.0.1:0", "--log-level", "error"}, io.Discard, &stderr, nil)
	out := stderr.String()
	if code != exitNoFit || !strings.Contains(out, "does not fit") || !strings.Contains(out, "short by") || !strings.Contains(out, "--gpu-memory-utilization 0.0437") {
		t.Fatalf("exit %d, stderr:\n%s", code, out)
	}
}

// The command serves until its context ends (SIGTERM in main), then shuts
// down and exits 0; bad flags exit 2.
func TestCommandServesAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr bytes.Buffer
	var status int
	code := execute(ctx, []string{"--config", "../configs/qwen3-0.6b.json", "--max-batch-tokens", "256", "--max-seq-len", "256",
		"--kv-blocks", "64", "--listen", "127.0.0.1:0", "--log-level", "error"}, io.Discard, &stderr, func(addr string) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			status = resp.StatusCode
			resp.Body.Close()
		}
		cancel()
	})
	if code != exitOK || status != http.StatusOK {
		t.Fatalf("exit %d, /readyz %d, stderr:\n%s", code, status, stderr.String())
	}
	for _, args := range [][]string{
		{"--listen", "127.0.0.1:0"},
		{"--config", "../configs/qwen3-0.6b.json", "--model", "x"},
		{"--config", "../configs/qwen3-0.6b.json", "--backend", "tpu"},
		{"--config", "../configs/qwen3-0.6b.json", "--max-batch-tokens", "-5", "--listen", "127.0.0.1:0"},
	} {
		stderr.Reset()
		if code := execute(context.Background(), args, io.Discard, &stderr, nil); code != exitFailure {
			t.Errorf("%v: exit %d, want %d; stderr:\n%s", args, code, exitFailure, stderr.String())
		}
	}
}
