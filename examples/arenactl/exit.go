package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit statuses.
const (
	exitOK       = 0
	exitNegative = 1 // a check said no: fit does not fit, a run invariant failed
	exitFailure  = 2 // the command could not do its job
	// exitInterrupted is the status of a command stopped by SIGINT (Ctrl-C):
	// 128 + the signal's number, the shells' convention; SIGTERM gives 143.
	exitInterrupted = 128 + int(syscall.SIGINT)
)

// interruptedError is the cause (context.Cause) of the command context's
// end when a signal stopped arenactl; errors.Is(err, context.Canceled)
// holds for it, as for the context's own error.
type interruptedError struct {
	sig syscall.Signal
}

// Error names the signal: "interrupted by SIGINT".
func (e *interruptedError) Error() string {
	switch e.sig {
	case syscall.SIGINT:
		return "interrupted by SIGINT"
	case syscall.SIGTERM:
		return "interrupted by SIGTERM"
	}
	return fmt.Sprintf("interrupted by signal %d (%v)", int(e.sig), e.sig)
}

// Is reports whether target is context.Canceled.
func (e *interruptedError) Is(target error) bool { return target == context.Canceled }

// code is the exit status: 128 + the signal's number.
func (e *interruptedError) code() int { return 128 + int(e.sig) }

// notifyContext is signal.NotifyContext for SIGINT and SIGTERM whose cause
// is an *interruptedError naming the signal, so execute can exit with the
// signal's status. stop stops the notification.
func notifyContext(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case s := <-ch:
			sig, _ := s.(syscall.Signal)
			cancel(&interruptedError{sig: sig})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(nil)
		<-done
	}
}

// interrupted returns the *interruptedError that ended ctx, or nil.
func interrupted(ctx context.Context) *interruptedError {
	var ie *interruptedError
	if errors.As(context.Cause(ctx), &ie) {
		return ie
	}
	return nil
}

// statusError is an error that carries the process exit status.
type statusError struct {
	code int
	err  error
}

// Error is the wrapped error's message.
func (e *statusError) Error() string { return e.err.Error() }

// Unwrap returns the wrapped error.
func (e *statusError) Unwrap() error { return e.err }

// negative marks err as a negative answer (exit status 1), not a failure.
func negative(err error) error { return &statusError{code: exitNegative, err: err} }

// execute runs arenactl with args, writing output to stdout and logs and the
// error to stderr, and returns the exit status. The error is printed once,
// here, and nowhere else. A command whose context a signal ended
// (notifyContext) exits with the signal's status (exitInterrupted for
// SIGINT), after it released what it built, and says so on stderr, unless
// it found an invariant broken (exitNegative), which is worth more to know.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	var se *statusError
	ie := interrupted(ctx)
	switch {
	case err == nil && ie == nil:
		return exitOK
	case err == nil:
		fmt.Fprintf(stderr, "arenactl: %v; what the command built was released\n", ie)
		return ie.code()
	}
	fmt.Fprintf(stderr, "arenactl: %v\n", err)
	switch {
	case errors.As(err, &se) && se.code == exitNegative:
		return se.code
	case ie != nil:
		return ie.code()
	case se != nil:
		return se.code
	}
	return exitFailure
}
