package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/examples/internal/serving"
	"github.com/gpuarena/gpuarena/kvcache"
)

// Finish reasons of a choice, as the OpenAI API names them ("abort" is
// vLLM's, for a request the server cut: shutdown past its deadline, or a
// failed step).
const (
	finishLength = "length"
	finishStop   = "stop"
	finishAbort  = "abort"
)

// ErrStopped is returned by engine.submit once the engine has stopped
// (shutdown) or failed (a step's error, logged).
var ErrStopped = errors.New("server: the engine is not running")

// ErrKVCacheTooSmall ends a choice whose prompt needs more KV blocks than
// the whole cache has.
var ErrKVCacheTooSmall = errors.New("server: the prompt needs more KV blocks than the cache has")

// event is one choice's news: a token, or its end (finish set, with err
// for a failure).
type event struct {
	choice int
	token  int32
	finish string
	err    error
}

// submission is one request's choices, as the engine takes them.
type submission struct {
	reqs  []serving.LiveRequest
	seeds []uint64
	keys  []serving.Key
	// events receives every choice's tokens and end; its capacity holds
	// all of them, so the engine never waits for a slow client.
	events chan event
	reply  chan error
}

// choiceState is what the engine keeps of one live choice.
type choiceState struct {
	sub    *submission
	choice int
	seed   uint64
	added  time.Time
	last   time.Time // the last token's delivery (the deliverer's); zero before the first
}

// engine is the serving loop: one goroutine that owns the scheduler
// (serving.Live) and drives the manager step by step. It is one goroutine
// reading one channel, not an actor framework's actor: the scheduler is a
// state machine without locks (like kvcache.Pool), a forward step is one
// at a time anyway (the GPU thread runs them in order), and one loop that
// takes arrivals and cancellations between steps keeps admission,
// preemption and the tokens' order deterministic for a given arrival
// order; what an actor would add (a mailbox, supervision) is the inbox
// channel and the stop/fail path here. Its events reach the handlers
// through a deliverer goroutine (deliver.go), off the step's path.
type engine struct {
	m       *gpuarena.Manager
	sched   *serving.Live
	model   *stepModel
	tables  serving.Tables // the batch's block_tables, written by the KV step
	seeds   []uint64       // each batch row's sampling seed, reused step after step
	log     *slog.Logger
	metrics *serverMetrics
	history *kvHistory
	out     *deliverer

	inbox  chan any // *submission, cancelMsg, idleMsg
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	nextK  serving.Key
	live   map[serving.Key]*choiceState
	idle   []chan struct{}
	failed error
}

// cancelMsg ends choices: their client went away or a stop string matched.
type cancelMsg struct {
	keys   []serving.Key
	finish string
}

// idleMsg asks for done to be closed once nothing is live.
type idleMsg struct{ done chan struct{} }

// newEngine returns a stopped engine; start runs it.
func newEngine(m *gpuarena.Manager, sched *serving.Live, model *stepModel, log *slog.Logger, metrics *serverMetrics, history *kvHistory) *engine {
	meta := model.meta
	return &engine{m: m, sched: sched, model: model, log: log, metrics: metrics, history: history,
		tables: serving.Tables{Shape: kvcache.TableShape{Rows: int(meta.Rows), Width: int(meta.BlockTableWidth)}, Dst: make([]byte, meta.BlockTables.Bytes)},
		out:    newDeliverer(metrics),
		inbox:  make(chan any, 64), stop: make(chan struct{}), done: make(chan struct{}),
		live: map[serving.Key]*choiceState{}}
}

// start runs the loop and the deliverer, each on its own goroutine.
func (e *engine) start() {
	e.out.start()
	go e.run()
}

// submit adds a request's choices (one sequence each) and returns the
// channel their events come on, tagged with the choice index. Errors: a
// *serving.LengthError for a prompt too long, ErrStopped, the context's.
func (e *engine) submit(ctx context.Context, reqs []serving.LiveRequest, seeds []uint64) (*submission, error) {
	capacity := 0
	for _, r := range reqs {
		capacity += r.MaxTokens + 1
	}
	s := &submission{reqs: reqs, seeds: seeds, events: make(chan event, capacity), reply: make(chan error, 1)}
	select {
	case e.inbox <- s:
	case <-e.done:
		return nil, ErrStopped
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case err := <-s.reply:
		return s, err
	case <-e.done:
		return nil, ErrStopped
	}
}

// cancel ends a submission's choices that are still live; their blocks
// are freed at the next step. It does not wait.
func (e *engine) cancel(s *submission, finish string) {
	select {
	case e.inbox <- cancelMsg{keys: s.keys, finish: finish}:
	case <-e.done:
	}
}

// quiesce waits until nothing is live (every choice ended and its blocks
// freed) or the engine stopped. Errors: the context's.
func (e *engine) quiesce(ctx context.Context) error {
	d := make(chan struct{})
	select {
	case e.inbox <- idleMsg{d}:
	case <-e.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-d:
	case <-e.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// close stops the loop: every live choice ends with finishAbort, and
// close returns once the loop has exited and every event was delivered.
// Idempotent.
func (e *engine) close() {
	e.once.Do(func() { close(e.stop) })
	<-e.done
}

// run is the loop: take messages, step while anything is live.
func (e *engine) run() {
	defer func() {
		e.abortAll(finishAbort, nil)
		e.out.close()
		close(e.done)
	}()
	ctx := context.Background()
	for {
		if e.sched.Idle() || e.failed != nil {
			for _, d := range e.idle {
				close(d)
			}
			e.idle = nil
			select {
			case msg := <-e.inbox:
				e.take(msg)
			case <-e.stop:
				return
			}
		}
		for drained := false; !drained; {
			select {
			case msg := <-e.inbox:
				e.take(msg)
			case <-e.stop:
				return
			default:
				drained = true
			}
		}
		if e.failed == nil && !e.sched.Idle() {
			if t, err := e.step(ctx); err != nil {
				e.log.Error("server: step failed; the engine stops serving", "err", err)
				e.failed = err
				e.abortAll(finishAbort, err)
			} else {
				e.metrics.overhead.Observe(t.overhead().Seconds())
			}
		}
		e.out.flush()
	}
}

// take handles one inbox message.
func (e *engine) take(msg any) {
	switch msg := msg.(type) {
	case *submission:
		if e.failed != nil {
			msg.reply <- fmt.Errorf("%w: %w", ErrStopped, e.failed)
			return
		}
		now := time.Now()
		for i, r := range msg.reqs {
			e.nextK++
			if err := e.sched.Add(e.nextK, r); err != nil {
				for _, k := range msg.keys {
					e.sched.Cancel(k)
					delete(e.live, k)
				}
				msg.reply <- err
				return
			}
			msg.keys = append(msg.keys, e.nextK)
			e.live[e.nextK] = &choiceState{sub: msg, choice: i, seed: msg.seeds[i], added: now}
		}
		msg.reply <- nil
	case cancelMsg:
		for _, k := range msg.keys {
			if c := e.live[k]; c != nil {
				e.sched.Cancel(k)
				delete(e.live, k)
				e.out.emit(c, event{choice: c.choice, finish: msg.finish})
			}
		}
	case idleMsg:
		e.idle = append(e.idle, msg.done)
	}
	e.metrics.queue.Set(float64(e.sched.Waiting()))
}

// stepTiming is one step's wall time and the part of it the forward's
// device work took (the model's forward on the GPU thread).
type stepTiming struct {
	total, device time.Duration
}

// overhead is the scheduler's own part of the step: everything but the
// device work (scheduling through the KV cache actor, which writes the
// block tables with the step, the Forward round trip to the GPU thread,
// commit, delivery).
func (t stepTiming) overhead() time.Duration { return t.total - t.device }

// step runs one scheduler step and its forward, and delivers the tokens:
// two round trips, one to the KV cache actor (the step, and the batch's
// block tables with it) and one to the GPU thread (the forward), one more
// to the KV cache actor per preemption round.
func (e *engine) step(ctx context.Context) (t stepTiming, err error) {
	began := time.Now()
	defer func() { t.total = time.Since(began) }()
	b, err := e.sched.Schedule(ctx, e.m, &e.tables)
	if err != nil {
		return t, err
	}
	for _, k := range b.Unservable {
		if c := e.live[k]; c != nil {
			delete(e.live, k)
			e.out.emit(c, event{choice: c.choice, finish: finishAbort, err: ErrKVCacheTooSmall})
		}
	}
	e.metrics.observeStep(b, e.sched)
	e.history.add(time.Now(), b.Counts)
	if len(b.Seqs) == 0 {
		return t, nil
	}
	e.seeds = e.seeds[:0]
	for _, s := range b.Seqs {
		seed := uint64(0)
		if c := e.live[s.Key]; c != nil {
			seed = c.seed
		}
		e.seeds = append(e.seeds, seed)
	}
	var next []int32
	if _, err := e.m.Forward(ctx, func(_ *device.Arena, dev device.Device) error {
		var err error
		began := time.Now()
		next, err = e.model.forward(dev, b, e.tables.Dst, e.seeds)
		t.device = time.Since(began)
		return err
	}); err != nil {
		return t, err
	}
	outs, err := e.sched.Commit(b, next)
	if err != nil {
		return t, err
	}
	for _, o := range outs {
		c := e.live[o.Key]
		if c == nil {
			continue
		}
		e.out.emit(c, event{choice: c.choice, token: o.Token})
		if o.Finished {
			delete(e.live, o.Key)
			e.out.emit(c, event{choice: c.choice, finish: finishLength})
		}
	}
	e.out.flush()
	return t, nil
}

// abortAll ends every live choice with finish (and err).
func (e *engine) abortAll(finish string, err error) {
	for k, c := range e.live {
		e.sched.Cancel(k)
		delete(e.live, k)
		e.out.emit(c, event{choice: c.choice, finish: finish, err: err})
	}
	e.out.flush()
}
