package pinned

import (
	"fmt"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// mailbox is the pinned actor's mailbox, a protoactor-go actor.Mailbox read
// directly by a Dispatcher's goroutine. protoactor-go's own mailbox, each
// time it goes from empty to busy, hands a run of its queue to the
// dispatcher as a function, through the dispatcher's queue; here a post is
// one push onto a lock-free queue, and a wake-up only when the goroutine is
// parked. It keeps the default mailbox's order and semantics: system
// messages before user messages, user messages held while suspended
// (SuspendMailbox, ResumeMailbox), a panic escalated to the actor's
// supervisor.
type mailbox struct {
	user, system *mpscQueue
	// waiting counts the user messages posted and not yet taken.
	waiting atomic.Int64

	invoker    actor.MessageInvoker
	dispatcher *Dispatcher
	suspended  bool // the consumer's
}

var _ actor.Mailbox = (*mailbox)(nil)

// NewMailbox makes the pinned mailbox (an actor.MailboxProducer, for
// actor.WithMailbox). Spawn the actor with it and actor.WithDispatcher(d) on
// a Dispatcher d, one actor per Dispatcher: the dispatcher's goroutine reads
// it.
func NewMailbox() actor.Mailbox {
	return &mailbox{user: newMPSCQueue(), system: newMPSCQueue()}
}

// PostUserMessage queues msg and wakes the dispatcher's goroutine if it is
// parked.
func (m *mailbox) PostUserMessage(msg any) {
	m.waiting.Add(1)
	m.user.push(msg)
	m.dispatcher.notify()
}

// PostSystemMessage queues msg ahead of every user message and wakes the
// dispatcher's goroutine if it is parked.
func (m *mailbox) PostSystemMessage(msg any) {
	m.system.push(msg)
	m.dispatcher.notify()
}

// RegisterHandlers attaches the mailbox to its actor and to dispatcher,
// which must be a *Dispatcher with no mailbox yet; protoactor-go calls it
// once, when it spawns the actor, before any message is posted.
func (m *mailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	d, ok := dispatcher.(*Dispatcher)
	if !ok {
		panic(fmt.Sprintf("pinned: the pinned mailbox needs a *pinned.Dispatcher, got %T", dispatcher))
	}
	m.invoker, m.dispatcher = invoker, d
	d.attach(m)
}

// Start does nothing: the dispatcher's goroutine is already running.
func (m *mailbox) Start() {}

// UserMessageCount is the number of user messages posted and not yet taken.
func (m *mailbox) UserMessageCount() int { return int(m.waiting.Load()) }

// pending reports whether run would handle a message. Consumer only.
func (m *mailbox) pending() bool {
	return !m.system.empty() || (!m.suspended && !m.user.empty())
}

// run handles up to limit messages, system messages first, and returns how
// many it handled; it stops early when the queues are empty, or when only
// user messages are left and the mailbox is suspended. A panic in a handler
// is escalated to the actor's supervisor (which suspends the mailbox) and
// ends the run. Consumer only.
func (m *mailbox) run(limit int) (n int) {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	for n < limit {
		var ok bool
		if msg, ok = m.system.pop(); ok {
			n++
			switch msg.(type) {
			case *actor.SuspendMailbox:
				m.suspended = true
			case *actor.ResumeMailbox:
				m.suspended = false
			default:
				m.invoker.InvokeSystemMessage(msg)
			}
			continue
		}
		if m.suspended {
			return n
		}
		if msg, ok = m.user.pop(); !ok {
			return n
		}
		n++
		m.waiting.Add(-1)
		m.invoker.InvokeUserMessage(msg)
	}
	return n
}
