//go:build unix

package main

import (
	"context"
	"syscall"
	"testing"
)

// notifyContext turns a real SIGINT into an interruptedError naming it, so
// the process exits 130 instead of dying or exiting 0.
func TestNotifyContextNamesTheSignal(t *testing.T) {
	ctx, stop := notifyContext(context.Background())
	defer stop()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	ie := interrupted(ctx)
	if ie == nil || ie.code() != exitInterrupted || ie.Error() != "interrupted by SIGINT" {
		t.Fatalf("cause %v: want SIGINT's interruptedError, exit %d", context.Cause(ctx), exitInterrupted)
	}
}
