package messages

import (
	"context"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/kvcache"
)

// The KV supervisor's requests (actors.KV). Each carries its context, which
// the supervisor checks when the request reaches it, and its reply channel
// of one. None of them waits for the GPU thread, so a forward step may send
// them.

// KVReserve claims the KV cache for a build: refused while one is built or
// being built. Reply: the error.
type KVReserve struct {
	Ctx   context.Context
	Reply chan<- error
}

// KVInstall ends a reserved build: the cache allocated and its block pool.
// Reply: the error (none unless the supervisor is broken).
type KVInstall struct {
	Cache *device.KVCache
	Pool  *kvcache.Pool
	Reply chan<- error
}

// KVAbort ends a reserved build that allocated nothing. Reply: when done.
type KVAbort struct {
	Reply chan<- struct{}
}

// KVDrop forgets the KV cache and its pool (Release and Close free its
// memory). Reply: whether there was one.
type KVDrop struct {
	Reply chan<- bool
}

// KVStep applies one scheduler step to the pool. Reply: KVStepReply.
type KVStep struct {
	Ctx   context.Context
	Step  kvcache.Step
	Reply chan<- KVStepReply
}

// KVStepReply answers KVStep: what the pool did, or why the step was not
// applied (Result is then empty).
type KVStepReply struct {
	Result kvcache.StepResult
	Err    error
}

// KVTables encodes Group's block tables of Batch into Dst
// (kvcache.Pool.EncodeBlockTables, Shape). Reply: the error.
type KVTables struct {
	Ctx   context.Context
	Group int
	Shape kvcache.TableShape
	Batch []kvcache.SeqID
	Dst   []byte
	Reply chan<- error
}

// KVBlockTable reads one sequence's block tables. Reply: KVBlockTableReply.
type KVBlockTable struct {
	Ctx   context.Context
	Seq   kvcache.SeqID
	Reply chan<- KVBlockTableReply
}

// KVBlockTableReply answers KVBlockTable: the tables by group, or the error.
type KVBlockTableReply struct {
	Tables [][]int32
	Err    error
}

// KVStats reads the pool's counts. Reply: KVStatsReply.
type KVStats struct {
	Ctx   context.Context
	Reply chan<- KVStatsReply
}

// KVStatsReply answers KVStats.
type KVStatsReply struct {
	Stats device.KVStats
	Err   error
}

// KVCheck checks the pool's invariants (kvcache.Pool.Check). Reply: the
// error.
type KVCheck struct {
	Ctx   context.Context
	Reply chan<- error
}

// KVResetPrefix forgets every cached prefix (kvcache.Pool.ResetPrefixCache).
// Reply: the error.
type KVResetPrefix struct {
	Ctx   context.Context
	Reply chan<- error
}

// Fail answers the request with err.
func (m *KVReserve) Fail(err error) { m.Reply <- err }

// Fail answers the request with err.
func (m *KVInstall) Fail(err error) { m.Reply <- err }

// Fail answers the request with err and no result.
func (m *KVStep) Fail(err error) { m.Reply <- KVStepReply{Err: err} }

// Fail answers the request with err.
func (m *KVTables) Fail(err error) { m.Reply <- err }

// Fail answers the request with err and no tables.
func (m *KVBlockTable) Fail(err error) { m.Reply <- KVBlockTableReply{Err: err} }

// Fail answers the request with err and no stats.
func (m *KVStats) Fail(err error) { m.Reply <- KVStatsReply{Err: err} }

// Fail answers the request with err.
func (m *KVCheck) Fail(err error) { m.Reply <- err }

// Fail answers the request with err.
func (m *KVResetPrefix) Fail(err error) { m.Reply <- err }
