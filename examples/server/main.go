// Server is a reference OpenAI-compatible inference server on gpuarena:
// the program a Go team copies to start its engine. See README.md.
//
//	server --model DIR  [serving flags]   load the weights and serve
//	server --config F   [serving flags]   serve the arena and KV cache only
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// main runs the server until SIGTERM or Ctrl-C, then shuts it down
// gracefully; a second signal cuts the drain short (signals.go). See
// serverLong for the exit statuses.
func main() {
	ctx, cut, stop := shutdownSignals(os.Interrupt, syscall.SIGTERM)
	code := executeCut(ctx, cut, os.Args[1:], os.Stdout, os.Stderr, nil)
	stop()
	os.Exit(code)
}

// execute is executeCut without a second signal.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer, ready func(addr string)) int {
	return executeCut(ctx, nil, args, stdout, stderr, ready)
}

// executeCut runs the command with args and returns the exit status; the
// error, if any, is printed once on stderr; "load" writes its report on
// stdout. The server shuts down when ctx ends; cut, closed while it
// drains, cuts the drain short (nil: never).
func executeCut(ctx context.Context, cut <-chan struct{}, args []string, stdout, stderr io.Writer, ready func(addr string)) int {
	cmd := newCommand(stdout, stderr, cut, ready)
	cmd.SetArgs(args)
	cmd.SetOut(stderr)
	cmd.SetErr(stderr)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "server: %v\n", err)
	var nf *NotFitError
	if errors.As(err, &nf) {
		return exitNoFit
	}
	return exitFailure
}
