package gpuworker

import (
	"context"
	"sync"
	"time"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// requests is a pool of one kind of request to the GPU actor, each kept
// with its reply channel, so that a round trip allocates one object, the
// mailbox's queue node: the request, its message and its channel come back
// to the pool once the reply has been read. A request whose caller stopped
// waiting (its context done, the worker gone) is left to the garbage
// collector instead, since its reply may still come. A request is
// answered at most once (a reply, or Fail), and only a request whose
// reply was read goes back, so a reused channel never holds an old reply.
//
// Garbage matters here because the GPU thread and its callers poll, and a
// collection needs them all: with 8 ranks on 16 cores, a fresh request per
// round trip (4 objects, 192 B) gave a median 2.75 M round trips/s and a
// pooled one 3.61 M (BenchmarkGroupRoundTrip, docs/performance/several-gpus.md).
// The queue node is not pooled: it is freed on the GPU thread and needed
// on the caller's, and a sync.Pool's steals across Ps cost more than the
// node (2.85–3.64 M/s against 4.08–5.41 M/s in one run of 5 rounds).
type requests[M, R any] struct {
	pool sync.Pool // of *request[M, R]
	// bind sets m's reply channel.
	bind func(m *M, reply chan<- R)
	// busy is how long a caller alone in the mailbox polls for the reply
	// (askBusy).
	busy time.Duration
}

// request is one request message and its reply channel, with room for one.
type request[M, R any] struct {
	msg   M
	reply chan R
}

// newRequests makes the pool of one kind of request: bind sets a message's
// reply channel, busy is askBusy's busy poll.
func newRequests[M, R any](bind func(m *M, reply chan<- R), busy time.Duration) *requests[M, R] {
	return &requests[M, R]{bind: bind, busy: busy}
}

// ask sends msg (its reply channel set from the pool) to w's GPU actor and
// waits for the reply as askBusy does, with askBusy's errors.
func (q *requests[M, R]) ask(ctx context.Context, w *Worker, msg M) (R, error) {
	c, _ := q.pool.Get().(*request[M, R])
	if c == nil {
		c = &request[M, R]{reply: make(chan R, 1)}
	}
	c.msg = msg
	q.bind(&c.msg, c.reply)
	r, err := askBusy(ctx, w, &c.msg, c.reply, q.busy)
	if err == nil { // the reply was read: nothing refers to c any more
		var zero M
		c.msg = zero // let the message's context, slices and step go
		q.pool.Put(c)
	}
	return r, err
}

// The pools of the worker's requests, one per kind. A forward step runs
// the embedder's code for an unknown time: its caller polls for the spin
// only.
var (
	pings              = newRequests(func(m *messages.Ping, r chan<- error) { m.Reply = r }, DefaultBusyPoll)
	allocs             = newRequests(func(m *messages.Alloc, r chan<- messages.AllocReply) { m.Reply = r }, DefaultBusyPoll)
	allocBatches       = newRequests(func(m *messages.AllocBatch, r chan<- messages.AllocBatchReply) { m.Reply = r }, DefaultBusyPoll)
	frees              = newRequests(func(m *messages.Free, r chan<- error) { m.Reply = r }, DefaultBusyPoll)
	freeBatches        = newRequests(func(m *messages.FreeBatch, r chan<- messages.FreeBatchReply) { m.Reply = r }, DefaultBusyPoll)
	freeOwners         = newRequests(func(m *messages.FreeOwner, r chan<- messages.FreeOwnerReply) { m.Reply = r }, DefaultBusyPoll)
	memsets            = newRequests(func(m *messages.Memset, r chan<- error) { m.Reply = r }, DefaultBusyPoll)
	copiesHtoD         = newRequests(func(m *messages.CopyHtoD, r chan<- error) { m.Reply = r }, DefaultBusyPoll)
	stagedCopies       = newRequests(func(m *messages.CopyHtoDStaged, r chan<- messages.CopyHtoDStagedReply) { m.Reply = r }, DefaultBusyPoll)
	stagingUnregisters = newRequests(func(m *messages.StagingUnregister, r chan<- error) { m.Reply = r }, DefaultBusyPoll)
	copiesDtoH         = newRequests(func(m *messages.CopyDtoH, r chan<- messages.CopyDtoHReply) { m.Reply = r }, DefaultBusyPoll)
	copiesDtoD         = newRequests(func(m *messages.CopyDtoD, r chan<- error) { m.Reply = r }, DefaultBusyPoll)
	memInfos           = newRequests(func(m *messages.MemInfo, r chan<- messages.MemInfoReply) { m.Reply = r }, DefaultBusyPoll)
	forwards           = newRequests(func(m *messages.Forward, r chan<- messages.ForwardReply) { m.Reply = r }, 0)
	ledgerSnapshots    = newRequests(func(m *messages.LedgerSnapshot, r chan<- device.Ledger) { m.Reply = r }, DefaultBusyPoll)
	statsRequests      = newRequests(func(m *messages.Stats, r chan<- device.Stats) { m.Reply = r }, DefaultBusyPoll)
	addViews           = newRequests(func(m *messages.AddView, r chan<- error) { m.Reply = r }, DefaultBusyPoll)
	ownerRetirements   = newRequests(func(m *messages.RetireOwners, r chan<- error) { m.Reply = r }, DefaultBusyPoll)
	moduleLoads        = newRequests(func(m *messages.LoadModule, r chan<- messages.LoadModuleReply) { m.Reply = r }, DefaultBusyPoll)
	moduleUnloads      = newRequests(func(m *messages.UnloadModule, r chan<- error) { m.Reply = r }, DefaultBusyPoll)
	graphCaptures      = newRequests(func(m *messages.CaptureGraph, r chan<- messages.CaptureGraphReply) { m.Reply = r }, DefaultBusyPoll)
	graphDestroys      = newRequests(func(m *messages.DestroyGraph, r chan<- error) { m.Reply = r }, DefaultBusyPoll)
)
