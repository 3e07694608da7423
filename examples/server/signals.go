package main

import (
	"context"
	"os"
	"os/signal"
)

// shutdownSignals relays sigs as the two stages of the server's shutdown:
// ctx ends at the first signal (shut down gracefully: drain), cut is
// closed at the second (cut the drain short). After the second the
// signals are no longer caught, so a third ends the process as the
// signal's default action does. stop stops catching them and returns once
// the relay has ended; call it once.
func shutdownSignals(sigs ...os.Signal) (ctx context.Context, cut <-chan struct{}, stop func()) {
	caught := make(chan os.Signal, 2)
	signal.Notify(caught, sigs...)
	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan struct{})
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		defer signal.Stop(caught)
		select {
		case <-caught:
			cancel()
		case <-quit:
			return
		}
		select {
		case <-caught:
			close(second)
		case <-quit:
		}
	}()
	return ctx, second, func() {
		close(quit)
		<-done
		cancel()
	}
}
