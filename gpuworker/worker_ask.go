package gpuworker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpuarena/gpuarena/gpuworker/internal/pinned"
)

// ctxDone is ctx.Done(), nil (never closed) for a nil ctx.
func ctxDone(ctx context.Context) <-chan struct{} {
	if ctx == nil {
		return nil
	}
	return ctx.Done()
}

// askBusy sends msg to the GPU actor (admit first) and waits for its
// reply on reply, for ctx, or for the worker to be gone. A caller that
// finds no request waiting in the GPU actor's mailbox polls for its reply
// (pinned.SendAndPoll), holding its P, for the spin and for as long as the
// GPU thread is awake, up to busy (0: the spin only); then it parks. Other
// callers, and every caller when polling is off (no spin, or GOMAXPROCS 1:
// the GPU thread needs a P of its own), park at once.
func askBusy[R any](ctx context.Context, w *Worker, msg any, reply <-chan R, busy time.Duration) (R, error) {
	if err := w.admit(); err != nil {
		var zero R
		return zero, err
	}
	r, err := sendAndWait(ctx, w.status.gone, func() (R, bool) {
		return pinned.SendAndPoll(w.dispatcher, func() { w.system.Root.Send(w.pid, msg) }, reply, ctxDone(ctx), w.status.gone, busy)
	}, reply)
	if errors.Is(err, ErrClosed) {
		err = w.Closed(err)
	}
	return r, err
}

// admit refuses a request before it is sent: ErrReentrant on the GPU
// thread (CheckCaller), ErrClosed (Closed) once the worker started to stop.
func (w *Worker) admit() error {
	if err := w.CheckCaller(); err != nil {
		return err
	}
	select {
	case <-w.closing:
		return w.Closed(ErrClosed)
	default:
		return nil
	}
}

// Closed is err, an ErrClosed of a request to this worker, with the
// worker's fatal error (Err) when it has one, so that the caller learns
// why it stopped.
func (w *Worker) Closed(err error) error {
	if fatal := w.Err(); fatal != nil && !errors.Is(err, fatal) {
		return fmt.Errorf("%w: %w", err, fatal)
	}
	return err
}

// CheckCaller returns ErrReentrant when called on the GPU thread, from inside
// a forward step, where waiting for the GPU actor would wait forever; nil
// anywhere else. Every call of the worker checks it, and so does AskVia.
func (w *Worker) CheckCaller() error {
	if w.dispatcher.OnPinnedThread() {
		return ErrReentrant
	}
	return nil
}
