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
//
// Steps overlap (tick): the loop schedules step N+1 and queues its
// forward while step N's forward runs on the GPU thread, then commits
// step N — vLLM's async scheduling and SGLang's overlap scheduler — so
// the GPU thread goes from one forward to the next without waiting for
// the scheduler's round trips. Each step has its own slot (block tables,
// seeds) so the two never share a buffer.
type engine struct {
	m       *gpuarena.Manager
	sched   *serving.Live
	model   *stepModel
	slots   [2]stepSlot // by step parity
	turn    int         // the slot the next step takes
	flight  *stepSlot   // the step whose forward runs, not yet committed
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
	// lastEnd is when the last committed step's forward ended.
	lastEnd time.Time
}

// stepSlot is one scheduled step: its batch, the buffers its forward reads
// (the block tables the KV step wrote, the rows' sampling seeds), and its
// forward's result.
type stepSlot struct {
	b      serving.Batch
	tables serving.Tables
	seeds  []uint64
	began  time.Time // when scheduling it began
	// behind is whether the forward before it was queued or running when
	// it was scheduled: the GPU thread then waits for it from that
	// forward's end; otherwise (after an idle spell) from began.
	behind bool
	// queued is its forward, nil for an empty batch; the forward writes
	// next (the sampled tokens, one per batch row, in a slice the model
	// reuses two forwards later) and its start and end on the GPU thread,
	// read after queued.Wait.
	queued     *gpuarena.QueuedStep
	next       []int32
	start, end time.Time
	cpu        time.Duration // the engine's own time for it: scheduling, then commit
}

// wait waits for the slot's forward (nothing to wait for with an empty
// batch) and returns its error.
func (sl *stepSlot) wait() error {
	if sl.queued == nil {
		return nil
	}
	_, err := sl.queued.Wait()
	return err
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
	e := &engine{m: m, sched: sched, model: model, log: log, metrics: metrics, history: history,
		out:   newDeliverer(metrics),
		inbox: make(chan any, 64), stop: make(chan struct{}), done: make(chan struct{}),
		live: map[serving.Key]*choiceState{}}
	for i := range e.slots {
		e.slots[i].tables = serving.Tables{Shape: kvcache.TableShape{Rows: int(meta.Rows), Width: int(meta.BlockTableWidth)}, Dst: make([]byte, meta.BlockTables.Bytes)}
	}
	return e
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
	ctx := context.Background()
	defer func() {
		if e.flight != nil {
			// Its forward may still read the slot's buffers.
			_ = e.flight.wait()
			e.flight = nil
		}
		e.abortAll(finishAbort, nil)
		e.out.close()
		close(e.done)
	}()
	for {
		if (e.sched.Idle() && e.flight == nil) || e.failed != nil {
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
		if e.failed == nil && (!e.sched.Idle() || e.flight != nil) {
			if t, ok, err := e.tick(ctx); err != nil {
				e.log.Error("server: step failed; the engine stops serving", "err", err)
				e.failed = err
				e.abortAll(finishAbort, err)
			} else if ok {
				e.metrics.overhead.Observe(t.exposed.Seconds())
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

// stepTiming is a committed step's times. device is its forward on the
// GPU thread (the model's work). exposed is the scheduler's overhead as the
// device sees it: how long the GPU thread waited for this step's forward
// after the previous one ended (or, after an idle spell, after its
// scheduling began) — with steps overlapped, the part of scheduling,
// committing the step before and the round trips that the forward before
// it did not hide. cpu is the engine's
// own time for the step (scheduling through the KV cache actor, commit,
// handing the tokens to the deliverer), which overlaps another forward.
type stepTiming struct {
	device, exposed, cpu time.Duration
}

// tick advances the pipeline by one step: it schedules the next step and
// queues its forward (when anything is live), then waits for the step in
// flight and commits it. It returns that committed step's timing (ok false
// when none was in flight). Forwards are queued (Manager.QueueForward) from
// this goroutine only, so they run in the order they were scheduled.
// Errors: the KV step's, the forward's, the commit's; the caller stops the
// engine.
func (e *engine) tick(ctx context.Context) (t stepTiming, ok bool, err error) {
	var next *stepSlot
	if !e.sched.Idle() {
		if next, err = e.schedule(ctx); err != nil {
			return t, false, err
		}
	}
	if f := e.flight; f != nil {
		e.flight = nil
		t, err = e.commit(f)
		if err != nil {
			if next != nil {
				_ = next.wait() // its forward may still read next's buffers
			}
			return t, false, err
		}
		ok = len(f.b.Seqs) > 0
	}
	e.flight = next
	return t, ok, nil
}

// schedule runs the scheduling half of a step into the next slot and
// queues its forward; an empty batch gets its (empty) result at once.
func (e *engine) schedule(ctx context.Context) (*stepSlot, error) {
	sl := &e.slots[e.turn]
	e.turn ^= 1
	sl.began = time.Now()
	sl.behind = e.flight != nil && e.flight.queued != nil
	b, err := e.sched.Schedule(ctx, e.m, &sl.tables)
	if err != nil {
		return nil, err
	}
	sl.b = b
	for _, k := range b.Unservable {
		if c := e.live[k]; c != nil {
			delete(e.live, k)
			e.out.emit(c, event{choice: c.choice, finish: finishAbort, err: ErrKVCacheTooSmall})
		}
	}
	e.metrics.observeStep(b, e.sched)
	e.history.add(time.Now(), b.Counts)
	sl.seeds = sl.seeds[:0]
	for _, s := range b.Seqs {
		seed := uint64(0)
		if c := e.live[s.Key]; c != nil {
			seed = c.seed
		}
		sl.seeds = append(sl.seeds, seed)
	}
	sl.queued, sl.next = nil, nil
	if len(b.Seqs) > 0 {
		sl.queued, err = e.m.QueueForward(ctx, func(_ *device.Arena, dev device.Device) error {
			sl.start = time.Now()
			var err error
			sl.next, err = e.model.forward(dev, b, sl.tables.Dst, sl.seeds)
			sl.end = time.Now()
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	sl.cpu = time.Since(sl.began)
	return sl, nil
}

// commit waits for sl's forward and commits its tokens, handing them to
// the deliverer; it returns the step's timing.
func (e *engine) commit(sl *stepSlot) (t stepTiming, err error) {
	if err := sl.wait(); err != nil {
		return t, err
	}
	began := time.Now()
	if sl.queued != nil {
		t.device = sl.end.Sub(sl.start)
		t.exposed = sl.start.Sub(sl.began)
		if sl.behind {
			t.exposed = sl.start.Sub(e.lastEnd)
		}
		e.lastEnd = sl.end
	}
	outs, err := e.sched.Commit(sl.b, sl.next)
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
	t.cpu = sl.cpu + time.Since(began)
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
