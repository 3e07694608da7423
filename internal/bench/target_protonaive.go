package bench

import (
	"context"
	"runtime"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena/gpuworker"
)

// naiveDispatcher is the obvious protoactor-go pinned dispatcher: Schedule
// sends the mailbox's run over an unbuffered channel to a goroutine locked to
// its thread, which parks between runs (no spin).
type naiveDispatcher struct {
	work   chan func()
	stop   chan struct{}
	exited chan struct{}
}

func newNaiveDispatcher() *naiveDispatcher {
	d := &naiveDispatcher{work: make(chan func()), stop: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		runtime.LockOSThread()
		defer close(d.exited)
		for {
			select {
			case fn := <-d.work:
				fn()
			case <-d.stop:
				return
			}
		}
	}()
	return d
}

// Schedule hands fn to the locked goroutine (dropping it after stop).
func (d *naiveDispatcher) Schedule(fn func()) {
	select {
	case d.work <- fn:
	case <-d.stop:
	}
}

// Throughput is protoactor-go's usual 300 messages per run.
func (d *naiveDispatcher) Throughput() int { return gpuworker.DefaultThroughput }

// The naive actor's requests; each carries a reply channel with room for one.
type (
	pingMsg    struct{ reply chan error }
	memInfoMsg struct{ reply chan error }
)

// naiveActor answers pingMsg and memInfoMsg on the naive dispatcher's thread,
// where it opens and closes its backend.
type naiveActor struct {
	factory gpuworker.BackendFactory
	backend gpuworker.Backend
	ready   chan error // the open's error, once
	closed  chan error // the close's error, once
}

// Receive handles one message.
func (a *naiveActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		var err error
		a.backend, err = a.factory()
		a.ready <- err
	case *actor.Stopped:
		if a.backend != nil {
			a.closed <- a.backend.Close()
		} else {
			a.closed <- nil
		}
	case *pingMsg:
		m.reply <- noop()
	case *memInfoMsg:
		m.reply <- memInfo(a.backend)
	}
}

// protoNaive is protoactor-go with the naive pinned dispatcher and the
// default mailbox, asked the way gpuarena asks (gpuworker.Ask: Send with a
// reply channel).
type protoNaive struct {
	system *actor.ActorSystem
	d      *naiveDispatcher
	a      *naiveActor
	pid    *actor.PID
	done   chan struct{}
}

func newProtoNaive(f gpuworker.BackendFactory) (*protoNaive, error) {
	p := &protoNaive{system: newSystem(), d: newNaiveDispatcher(), done: make(chan struct{}),
		a: &naiveActor{factory: f, ready: make(chan error, 1), closed: make(chan error, 1)}}
	props := actor.PropsFromProducer(func() actor.Actor { return p.a }, actor.WithDispatcher(p.d))
	p.pid = p.system.Root.Spawn(props)
	if err := <-p.a.ready; err != nil {
		_ = p.Close()
		return nil, err
	}
	return p, nil
}

// Concurrent is true: the mailbox serialises the requests.
func (p *protoNaive) Concurrent() bool { return true }

// Exec runs body with a call that asks the actor.
func (p *protoNaive) Exec(body func(call func(Op) error) error) error {
	ctx := context.Background()
	return body(func(op Op) error {
		reply := make(chan error, 1)
		var msg any = &pingMsg{reply: reply}
		if op == OpMemInfo {
			msg = &memInfoMsg{reply: reply}
		}
		r, err := gpuworker.Ask(ctx, p.system.Root, p.pid, msg, reply, p.done)
		if err != nil {
			return err
		}
		return r
	})
}

// Close stops the actor (which closes its backend on its thread), the
// dispatcher's goroutine and the actor system.
func (p *protoNaive) Close() error {
	_ = p.system.Root.PoisonFuture(p.pid).Wait()
	err := <-p.a.closed
	close(p.done)
	close(p.d.stop)
	<-p.d.exited
	p.system.Shutdown()
	return err
}
