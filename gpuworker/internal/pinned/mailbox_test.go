package pinned

import (
	"slices"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// recordingInvoker records what a mailbox hands it, in order; it
// panics on the user message panicOn.
type recordingInvoker struct {
	got       []any
	escalated []any
	panicOn   any
}

func (r *recordingInvoker) InvokeSystemMessage(m any) { r.got = append(r.got, m) }
func (r *recordingInvoker) InvokeUserMessage(m any) {
	if r.panicOn != nil && m == r.panicOn {
		panic("handler failed")
	}
	r.got = append(r.got, m)
}
func (r *recordingInvoker) EscalateFailure(reason, m any) {
	r.escalated = append(r.escalated, reason, m)
}

// newTestMailbox is a pinned mailbox on a dispatcher with no goroutine: the
// test plays the consumer and calls run itself.
func newTestMailbox(inv actor.MessageInvoker) *mailbox {
	m := NewMailbox().(*mailbox)
	m.RegisterHandlers(inv, &Dispatcher{})
	return m
}

// System messages are handled before user messages posted earlier; user
// messages in the order posted; waiting counts the user messages not taken.
func TestMailboxHandlesSystemMessagesFirst(t *testing.T) {
	inv := &recordingInvoker{}
	m := newTestMailbox(inv)
	stop := &actor.Stop{}
	m.PostUserMessage("u1")
	m.PostSystemMessage(stop)
	m.PostUserMessage("u2")
	if n := m.UserMessageCount(); n != 2 {
		t.Fatalf("UserMessageCount = %d before run, want 2", n)
	}
	if n := m.run(10); n != 3 {
		t.Fatalf("run handled %d messages, want 3", n)
	}
	if want := []any{stop, "u1", "u2"}; !slices.Equal(inv.got, want) {
		t.Fatalf("handled %v, want %v", inv.got, want)
	}
	if n := m.UserMessageCount(); n != 0 || m.pending() {
		t.Fatalf("after run: UserMessageCount = %d, pending = %v; want 0, false", n, m.pending())
	}
}

// A suspended mailbox holds its user messages until it is resumed, and
// still handles system messages.
func TestMailboxHoldsUserMessagesWhileSuspended(t *testing.T) {
	inv := &recordingInvoker{}
	m := newTestMailbox(inv)
	m.PostSystemMessage(&actor.SuspendMailbox{})
	m.PostUserMessage("u1")
	m.run(10)
	if len(inv.got) != 0 || m.UserMessageCount() != 1 || m.pending() {
		t.Fatalf("suspended: handled %v, %d waiting, pending %v; want nothing handled, 1 waiting, not pending",
			inv.got, m.UserMessageCount(), m.pending())
	}
	stop := &actor.Stop{}
	m.PostSystemMessage(stop)
	m.PostSystemMessage(&actor.ResumeMailbox{})
	m.run(10)
	if want := []any{stop, "u1"}; !slices.Equal(inv.got, want) {
		t.Fatalf("after resume: handled %v, want %v", inv.got, want)
	}
}

// A panicking handler is escalated with its message and ends the run; the
// next run goes on with the next message.
func TestMailboxEscalatesAPanic(t *testing.T) {
	inv := &recordingInvoker{panicOn: "bad"}
	m := newTestMailbox(inv)
	m.PostUserMessage("bad")
	m.PostUserMessage("u2")
	if n := m.run(10); n != 1 {
		t.Fatalf("run handled %d messages before the panic ended it, want 1", n)
	}
	if len(inv.escalated) != 2 || inv.escalated[0] != "handler failed" || inv.escalated[1] != "bad" {
		t.Fatalf("escalated %v, want [handler failed bad]", inv.escalated)
	}
	m.run(10)
	if want := []any{"u2"}; !slices.Equal(inv.got, want) {
		t.Fatalf("handled %v after the panic, want %v", inv.got, want)
	}
}

// run handles at most limit messages.
func TestMailboxRunStopsAtTheLimit(t *testing.T) {
	inv := &recordingInvoker{}
	m := newTestMailbox(inv)
	for _, s := range []string{"a", "b", "c"} {
		m.PostUserMessage(s)
	}
	if n := m.run(2); n != 2 || m.UserMessageCount() != 1 {
		t.Fatalf("run(2) handled %d, %d left; want 2, 1", n, m.UserMessageCount())
	}
}
