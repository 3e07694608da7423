//go:build unix

package main

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// The first signal ends the shutdown context, the second closes cut; stop
// ends the relay (goleak checks it).
func TestShutdownSignals(t *testing.T) {
	ctx, cut, stop := shutdownSignals(syscall.SIGUSR1)
	defer stop()
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
		t.Fatal("the shutdown context ended before any signal")
	case <-cut:
		t.Fatal("cut closed before any signal")
	default:
	}
	if err := self.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
		t.Fatal("the first signal did not end the shutdown context")
	}
	select {
	case <-cut:
		t.Fatal("cut closed at the first signal")
	default:
	}
	if err := self.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cut:
	case <-time.After(time.Minute):
		t.Fatal("the second signal did not close cut")
	}
}

// stop before any signal ends the relay and the context.
func TestShutdownSignalsStop(t *testing.T) {
	ctx, cut, stop := shutdownSignals(syscall.SIGUSR1)
	stop()
	if ctx.Err() == nil {
		t.Fatal("the shutdown context is live after stop")
	}
	select {
	case <-cut:
		t.Fatal("cut closed by stop")
	default:
	}
}
