package main

import (
	"sync"
	"time"
)

// delivery is one event for one choice, on its way from the engine's loop
// to the choice's handler.
type delivery struct {
	c  *choiceState
	ev event
}

// deliverer hands the engine's events to the handlers on a goroutine of
// its own, so that a step does not wait for hundreds of channel sends
// (each a cold cache line, or a handler to wake): the loop queues a step's
// events (emit) and passes them on in one send (flush), and the deliverer
// sends them on, in the order the loop queued them — a choice's tokens
// before its end — and observes time to first token and inter-token
// latency as each token leaves. It never waits for a client: a choice's
// events channel holds all its events.
type deliverer struct {
	metrics *serverMetrics
	pending []delivery      // the loop's, until flush
	outbox  chan []delivery // the loop's batches, in order
	spare   chan []delivery // batches delivered, back for reuse
	once    sync.Once
	done    chan struct{} // closed when the deliverer has sent everything and exited
}

func newDeliverer(metrics *serverMetrics) *deliverer {
	return &deliverer{metrics: metrics, outbox: make(chan []delivery, 64), spare: make(chan []delivery, 4), done: make(chan struct{})}
}

// start runs the deliverer on its own goroutine (once).
func (d *deliverer) start() { d.once.Do(func() { go d.run() }) }

// emit queues ev for c (the loop's goroutine only).
func (d *deliverer) emit(c *choiceState, ev event) {
	d.pending = append(d.pending, delivery{c: c, ev: ev})
}

// flush passes the queued events on (the loop's goroutine only).
func (d *deliverer) flush() {
	if len(d.pending) == 0 {
		return
	}
	d.outbox <- d.pending
	select {
	case d.pending = <-d.spare:
	default:
		d.pending = nil
	}
}

// close flushes, then waits until every event is sent and the deliverer
// has exited (the loop's goroutine, once, after its last flush).
func (d *deliverer) close() {
	d.flush()
	close(d.outbox)
	d.start() // a loop that never ran still has its events sent
	<-d.done
}

// run sends the batches' events on.
func (d *deliverer) run() {
	defer close(d.done)
	for batch := range d.outbox {
		now := time.Now()
		for i := range batch {
			c, ev := batch[i].c, batch[i].ev
			if ev.finish == "" {
				if c.last.IsZero() {
					d.metrics.ttft.Observe(now.Sub(c.added).Seconds())
				} else {
					d.metrics.itl.Observe(now.Sub(c.last).Seconds())
				}
				c.last = now
			}
			c.sub.events <- ev
		}
		clear(batch)
		select {
		case d.spare <- batch[:0]:
		default:
		}
	}
}
