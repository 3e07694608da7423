package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/gpuworker"
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

// Serving options under which the server could serve nothing are refused
// at start-up with exit status 2 and a message saying what to change,
// before the server listens: a negative --kv-blocks or 1 (the pool keeps
// block 0 back), a max_seq_len below 2 (a prompt token and one
// generated), a KV cache holding fewer than 2 tokens.
func TestRefusesServingNothing(t *testing.T) {
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--kv-blocks", "-5"}, "--kv-blocks -5: must be 0 (all the fit allows) or at least 2"},
		{[]string{"--kv-blocks", "-1"}, "--kv-blocks -1: must be 0 (all the fit allows) or at least 2"},
		{[]string{"--kv-blocks", "1"}, "--kv-blocks 1: must be 0 (all the fit allows) or at least 2"},
		{[]string{"--max-seq-len", "1"}, "max_seq_len 1: a request needs at least 2 tokens (a prompt token and one generated), so the server could serve nothing: give --max-seq-len 2 or more"},
		{[]string{"--max-model-len", "1"}, "give --max-seq-len 2 or more"},
		{[]string{"--kv-block-size", "1", "--kv-blocks", "2"}, "2 KV blocks of 1 tokens hold 1 tokens (block 0 is the pool's null block): a request needs at least 2 tokens"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		var stderr bytes.Buffer
		served := false
		args := append([]string{"--config", "../configs/qwen3-0.6b.json", "--listen", "127.0.0.1:0", "--log-level", "error"}, c.args...)
		code := execute(ctx, args, io.Discard, &stderr, func(string) { served = true; cancel() })
		cancel()
		if code != exitFailure || served || !strings.Contains(stderr.String(), c.says) {
			t.Errorf("%v: exit %d, served %v, stderr:\n%s\nwant exit %d before serving, saying %q", c.args, code, served, stderr.String(), exitFailure, c.says)
		}
	}
	st := settings{config: "../configs/qwen3-0.6b.json", utilization: 0.9, opts: arena.Options{MaxSeqLen: 1},
		backend: gpuworker.BackendConfig{Kind: gpuworker.KindHostSim, HostSim: gpuworker.HostSimConfig{Name: "hostsim H200", TotalBytes: gpuworker.H200Bytes}}}
	if _, err := start(context.Background(), st, slog.New(slog.DiscardHandler)); !errors.Is(err, ErrRequestLimitTooSmall) {
		t.Fatalf("start with max_seq_len 1: %v, want ErrRequestLimitTooSmall", err)
	}
}
