package actors

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena/gpuworker"
)

// child is one supervisor as its callers see it: its PID and a channel closed
// when it has stopped for good (Stop, or too many failures).
type child struct {
	name     string
	pid      *actor.PID
	gone     chan struct{}
	goneOnce sync.Once
}

func newChild(name string) *child { return &child{name: name, gone: make(chan struct{})} }

// stopped closes gone; it is idempotent.
func (ch *child) stopped() { ch.goneOnce.Do(func() { close(ch.gone) }) }

// parent spawns the three supervisors as its children and supervises them
// with RestartStrategy (its props carry it). It is told when a child stops for
// good (*actor.Terminated), and closes the child's gone channel so that no
// caller waits for a reply from a supervisor that is not there.
type parent struct {
	worker   *gpuworker.Worker
	cfg      config
	release  *child
	slab     *child
	arena    *child
	chain    *child // stopped when any of the three is: what a Release waits on
	spawned  chan<- struct{}
	children bool
}

// Receive spawns the children on Started and tracks their termination.
func (p *parent) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		if p.children { // never restarted in practice; never spawn twice
			return
		}
		p.children = true
		w, cfg := p.worker, p.cfg
		p.release.pid = spawnChild(c, p.release.name, func() actor.Actor { return &releaseSupervisor{worker: w, cfg: cfg} })
		release := p.release.pid
		p.slab.pid = spawnChild(c, p.slab.name, func() actor.Actor { return &slabSupervisor{worker: w, cfg: cfg, release: release} })
		slab := p.slab.pid
		p.arena.pid = spawnChild(c, p.arena.name, func() actor.Actor {
			return &arenaSupervisor{worker: w, cfg: cfg, release: release, slab: slab}
		})
		close(p.spawned)
	case *actor.Terminated:
		for _, ch := range []*child{p.arena, p.slab, p.release} {
			if ch.pid != nil && ch.pid.Equal(m.Who) {
				ch.stopped()
				p.chain.stopped()
			}
		}
	case *actor.Stopped:
		for _, ch := range []*child{p.arena, p.slab, p.release, p.chain} {
			ch.stopped()
		}
	}
}

// spawnChild spawns a supervisor named name under the parent. The producer
// makes a fresh, empty supervisor each time, on the first start and on every
// restart; it rebuilds its state from the ledger on *actor.Started.
func spawnChild(c actor.Context, name string, producer actor.Producer) *actor.PID {
	pid, err := c.SpawnNamed(actor.PropsFromProducer(producer), name)
	if err != nil { // a fresh parent has no child of that name
		panic(err)
	}
	return pid
}
