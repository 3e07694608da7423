package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// cancelOnWrite is a stdout that ends the command's context, as Ctrl-C
// does, once the output holds mark.
type cancelOnWrite struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	mark   string
	cancel context.CancelCauseFunc
	sig    syscall.Signal
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.mark) {
		w.cancel(&interruptedError{sig: w.sig})
	}
	return n, err
}

func (w *cancelOnWrite) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// A soak stopped by a signal closes its managers, prints its summary, says
// it was interrupted, and exits 128 + the signal: never 0.
func TestSoakInterruptedExitsNonZero(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		ctx, cancel := context.WithCancelCause(context.Background())
		stdout := &cancelOnWrite{mark: "] cycle ", cancel: cancel, sig: sig}
		var stderr bytes.Buffer
		code := execute(ctx, []string{"soak", "--duration", "1h", "--clients", "2", "--interval", "50ms",
			"--config", configPath("llama-3.1-8b"), "--max-batch-tokens", "64"}, stdout, &stderr)
		cancel(nil)
		out := stdout.String()
		if want := 128 + int(sig); code != want {
			t.Errorf("%v: exit %d, want %d; stderr %q", sig, code, want, stderr.String())
		}
		if !strings.Contains(out, "invariants: all hold") || !strings.Contains(out, "interrupted before --duration 1h0m0s") {
			t.Errorf("%v: no summary or no word of the interruption:\n%s", sig, out)
		}
		if !strings.Contains(stderr.String(), "interrupted by "+map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM"}[sig]) ||
			!strings.Contains(stderr.String(), "every manager closed") {
			t.Errorf("%v: stderr %q does not say the soak was interrupted and released", sig, stderr.String())
		}
	}
}

// A context a signal ended gives the signal's status, whatever the command
// returned, except a negative answer (an invariant broken), which wins.
func TestExitStatusOfAnInterruptedCommand(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(&interruptedError{sig: syscall.SIGINT})
	var stdout, stderr bytes.Buffer
	// plan ignores its context: it succeeds, and the status is still 130.
	if code := execute(ctx, []string{"plan", "--config", configPath("llama-3.1-8b")}, &stdout, &stderr); code != exitInterrupted {
		t.Errorf("plan under an interrupted context: exit %d, want %d", code, exitInterrupted)
	}
	if !strings.Contains(stderr.String(), "interrupted by SIGINT") {
		t.Errorf("stderr %q does not say so", stderr.String())
	}
	// run stops with the context's error: 130, not 2.
	stderr.Reset()
	if code := execute(ctx, []string{"run", "--config", configPath("llama-3.1-8b"), "--steps", "3"}, &stdout, &stderr); code != exitInterrupted {
		t.Errorf("run under an interrupted context: exit %d, want %d; stderr %q", code, exitInterrupted, stderr.String())
	}
	if ie := interrupted(ctx); ie == nil || !errors.Is(ie, context.Canceled) {
		t.Errorf("interrupted(ctx) = %v, want an error that is context.Canceled", ie)
	}
}
