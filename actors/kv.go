package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/messages"
	"github.com/gpuarena/gpuarena/kvcache"
)

// Errors of the KV supervisor.
var (
	// ErrNoKVCache: a KV request before a KV cache was built, or after
	// Release dropped it.
	ErrNoKVCache = errors.New("no kv cache built")
	// ErrKVCacheBuilt: a build while a KV cache is built or being built.
	ErrKVCacheBuilt = errors.New("a kv cache is already built")
)

// KV is the KV cache supervisor: one actor that owns the built KV cache's
// block pool (kvcache.Pool, which has no lock of its own) and applies every
// change to it, one message at a time, so its mailbox is what serialises
// the pool — the rule that serialises slab carves. A scheduler step is one
// message (KVStep) and one round trip, the batch's block tables written
// with it when the step asks (kvcache.Step.Tables). The supervisor never
// waits for the GPU thread, so forward steps may call it.
//
// A panic while it handles a request (a bug in the pool) is answered with
// ErrSupervisorPanic, and the pool, which may be half changed, is not used
// again: later requests get that error until Release drops the cache. Make
// one with SpawnKV; Stop it before the actor system.
type KV struct {
	system   *actor.ActorSystem
	pid      *actor.PID
	closing  chan struct{}
	stopOnce sync.Once
}

// SpawnKV starts the KV supervisor in system.
func SpawnKV(system *actor.ActorSystem, logger *slog.Logger) *KV {
	k := &kvActor{logger: logger}
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return k }))
	return &KV{system: system, pid: pid, closing: make(chan struct{})}
}

// Stop stops the supervisor after the requests in its mailbox and waits for
// it; later requests get gpuworker.ErrClosed. Idempotent.
func (k *KV) Stop() {
	k.stopOnce.Do(func() {
		close(k.closing)
		_ = k.system.Root.PoisonFuture(k.pid).Wait()
	})
}

// kvAsk sends msg and waits for its reply. The supervisor checks ctx when
// the request reaches it; once sent, the wait is not cut short by ctx (a
// pool operation takes microseconds, and a step the pool applied must not
// be reported as not applied), only by Stop.
func kvAsk[R any](k *KV, msg any, reply <-chan R) (R, error) {
	select {
	case <-k.closing:
		var zero R
		return zero, fmt.Errorf("kv cache: %w", gpuworker.ErrClosed)
	default:
	}
	k.system.Root.Send(k.pid, msg)
	select {
	case r := <-reply:
		return r, nil
	case <-k.closing:
		// Stop waits for the mailbox, so the reply comes unless the request
		// arrived after the actor stopped.
		select {
		case r := <-reply:
			return r, nil
		default:
			var zero R
			return zero, fmt.Errorf("kv cache: %w", gpuworker.ErrClosed)
		}
	}
}

// Reserve claims the cache for a build. Errors: ErrKVCacheBuilt, the
// context's, ErrSupervisorPanic (a broken pool), gpuworker.ErrClosed.
func (k *KV) Reserve(ctx context.Context) error {
	reply := make(chan error, 1)
	r, err := kvAsk(k, &messages.KVReserve{Ctx: ctx, Reply: reply}, reply)
	return errors.Join(err, r)
}

// Install ends a reserved build with the cache and its pool.
func (k *KV) Install(cache *device.KVCache, pool *kvcache.Pool) error {
	reply := make(chan error, 1)
	r, err := kvAsk(k, &messages.KVInstall{Cache: cache, Pool: pool, Reply: reply}, reply)
	return errors.Join(err, r)
}

// Abort ends a reserved build that allocated nothing.
func (k *KV) Abort() {
	reply := make(chan struct{}, 1)
	_, _ = kvAsk(k, &messages.KVAbort{Reply: reply}, reply)
}

// Drop forgets the cache and its pool, live sequences and all, and reports
// whether there was one; Release and Close call it before freeing the
// memory.
func (k *KV) Drop() bool {
	reply := make(chan bool, 1)
	had, _ := kvAsk(k, &messages.KVDrop{Reply: reply}, reply)
	return had
}

// Step applies one scheduler step (kvcache.Pool.Apply), writing the block
// tables s.Tables asks for before it replies. Errors: ErrNoKVCache,
// the context's (the step was not applied), ErrSupervisorPanic,
// gpuworker.ErrClosed; requests the pool refuses are in the result.
func (k *KV) Step(ctx context.Context, s kvcache.Step) (kvcache.StepResult, error) {
	reply := make(chan messages.KVStepReply, 1)
	r, err := kvAsk(k, &messages.KVStep{Ctx: ctx, Step: s, Reply: reply}, reply)
	return r.Result, errors.Join(err, r.Err)
}

// EncodeBlockTables writes group's block tables of batch into dst
// (kvcache.Pool.EncodeBlockTables). Errors: those, and Step's.
func (k *KV) EncodeBlockTables(ctx context.Context, group int, shape kvcache.TableShape, batch []kvcache.SeqID, dst []byte) error {
	reply := make(chan error, 1)
	r, err := kvAsk(k, &messages.KVTables{Ctx: ctx, Group: group, Shape: shape, Batch: batch, Dst: dst, Reply: reply}, reply)
	return errors.Join(err, r)
}

// BlockTable returns seq's block tables by group (kvcache.Pool.BlockTable).
func (k *KV) BlockTable(ctx context.Context, seq kvcache.SeqID) ([][]int32, error) {
	reply := make(chan messages.KVBlockTableReply, 1)
	r, err := kvAsk(k, &messages.KVBlockTable{Ctx: ctx, Seq: seq, Reply: reply}, reply)
	return r.Tables, errors.Join(err, r.Err)
}

// Stats returns the pool's counts.
func (k *KV) Stats(ctx context.Context) (device.KVStats, error) {
	reply := make(chan messages.KVStatsReply, 1)
	r, err := kvAsk(k, &messages.KVStats{Ctx: ctx, Reply: reply}, reply)
	return r.Stats, errors.Join(err, r.Err)
}

// Check checks the pool's invariants (kvcache.Pool.Check).
func (k *KV) Check(ctx context.Context) error {
	reply := make(chan error, 1)
	r, err := kvAsk(k, &messages.KVCheck{Ctx: ctx, Reply: reply}, reply)
	return errors.Join(err, r)
}

// ResetPrefixCache forgets every cached prefix
// (kvcache.Pool.ResetPrefixCache: only when no block is in use).
func (k *KV) ResetPrefixCache(ctx context.Context) error {
	reply := make(chan error, 1)
	r, err := kvAsk(k, &messages.KVResetPrefix{Ctx: ctx, Reply: reply}, reply)
	return errors.Join(err, r)
}

// kvActor is the supervisor's state, touched only by its Receive.
type kvActor struct {
	logger   *slog.Logger
	building bool
	cache    *device.KVCache
	pool     *kvcache.Pool
	broken   error // set when handling a request panicked; cleared by Drop
}

// Receive handles one request.
func (k *kvActor) Receive(c actor.Context) {
	msg := c.Message()
	defer k.recover(msg)
	switch m := msg.(type) {
	case *messages.KVReserve:
		m.Reply <- k.reserve(m.Ctx)
	case *messages.KVInstall:
		err := k.broken
		if err == nil {
			k.cache, k.pool = m.Cache, m.Pool
		}
		k.building = false
		m.Reply <- err
	case *messages.KVAbort:
		k.building = false
		m.Reply <- struct{}{}
	case *messages.KVDrop:
		had := k.pool != nil || k.broken != nil
		k.cache, k.pool, k.broken = nil, nil, nil
		m.Reply <- had
	case *messages.KVStep:
		if err := k.usable(m.Ctx); err != nil {
			m.Reply <- messages.KVStepReply{Err: err}
			return
		}
		m.Reply <- messages.KVStepReply{Result: k.pool.Apply(m.Step)}
	case *messages.KVTables:
		err := k.usable(m.Ctx)
		if err == nil {
			err = k.pool.EncodeBlockTables(m.Dst, m.Shape, m.Group, m.Batch)
		}
		m.Reply <- err
	case *messages.KVBlockTable:
		if err := k.usable(m.Ctx); err != nil {
			m.Reply <- messages.KVBlockTableReply{Err: err}
			return
		}
		t, err := k.pool.BlockTable(m.Seq)
		m.Reply <- messages.KVBlockTableReply{Tables: t, Err: err}
	case *messages.KVStats:
		if err := k.usable(m.Ctx); err != nil {
			m.Reply <- messages.KVStatsReply{Err: err}
			return
		}
		m.Reply <- messages.KVStatsReply{Stats: k.stats()}
	case *messages.KVCheck:
		err := k.usable(m.Ctx)
		if err == nil {
			err = k.pool.Check()
		}
		m.Reply <- err
	case *messages.KVResetPrefix:
		err := k.usable(m.Ctx)
		if err == nil {
			err = k.pool.ResetPrefixCache()
		}
		m.Reply <- err
	}
}

func (k *kvActor) reserve(ctx context.Context) error {
	switch {
	case k.broken != nil:
		return k.broken
	case ctx != nil && ctx.Err() != nil:
		return ctx.Err()
	case k.building || k.pool != nil:
		return fmt.Errorf("build kv cache: %w: Release frees the one there is", ErrKVCacheBuilt)
	}
	k.building = true
	return nil
}

// usable is the error a pool request gets before it touches the pool.
func (k *kvActor) usable(ctx context.Context) error {
	switch {
	case k.broken != nil:
		return k.broken
	case ctx != nil && ctx.Err() != nil:
		return ctx.Err()
	case k.pool == nil:
		return fmt.Errorf("kv cache: %w: build one with BuildKVCache", ErrNoKVCache)
	}
	return nil
}

func (k *kvActor) stats() device.KVStats {
	counts := k.pool.Counts()
	st := device.KVStats{Groups: make([]device.KVGroupStats, len(counts)), Prefix: k.pool.PrefixStats(), Sequences: k.pool.Len()}
	for i, c := range counts {
		st.Groups[i] = device.KVGroupStats{Name: k.cache.Groups[i].Name, GroupCounts: c}
	}
	return st
}

// recover answers a request whose handling panicked with
// ErrSupervisorPanic and marks the pool broken: the actor goes on, so Drop
// (Release) still works.
func (k *kvActor) recover(msg any) {
	r := recover()
	if r == nil {
		return
	}
	err := fmt.Errorf("kv supervisor: %w: %v; the block pool is not used again until Release drops it", ErrSupervisorPanic, r)
	k.broken = err
	k.building = false
	k.logger.Error("kv supervisor panicked", "message", fmt.Sprintf("%T", msg), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	if f, ok := msg.(messages.Failer); ok {
		f.Fail(err)
	}
}
