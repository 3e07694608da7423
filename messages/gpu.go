package messages

import (
	"context"
	"time"
)

// The requests below are answered by the GPU actor (package gpuworker). Each
// names the owner the bytes are held for; an owner is a free-form id such as
// "arena" or "slab/ssm_rowwise_w_bf16" that the ledger groups allocations by.

// Alloc asks for one device allocation of Bytes bytes (> 0), recorded in the
// ledger as Label under Owner. Reply: AllocReply.
type Alloc struct {
	Ctx   context.Context
	Owner string
	Label string
	Bytes int64
	Reply chan<- AllocReply
}

// AllocReply answers Alloc: the pointer, or an error (gpuworker.ErrOutOfMemory
// wrapped in a *gpuworker.OutOfMemoryError, gpuworker.ErrInvalidValue for a
// size ≤ 0, or the context's error when it was done before the work started).
type AllocReply struct {
	Ptr DevicePtr
	Err error
}

// AllocItem is one allocation of an AllocBatch.
type AllocItem struct {
	Label string
	Bytes int64
}

// AllocBatch asks for every item or none: when item k fails, items 0..k−1
// are freed before the reply and the ledger is where it was. Reply:
// AllocBatchReply.
type AllocBatch struct {
	Ctx   context.Context
	Owner string
	Items []AllocItem
	Reply chan<- AllocBatchReply
}

// AllocBatchReply answers AllocBatch: one pointer per item, in order, or an
// error naming the item that failed (and nil Ptrs).
type AllocBatchReply struct {
	Ptrs []DevicePtr
	Err  error
}

// PoolView is one buffer inside a pool allocation: its label and its byte
// range within the pool.
type PoolView struct {
	Label  string
	Offset int64
	Bytes  int64
}

// AllocPool asks for one allocation of Bytes bytes holding several buffers:
// one backend call, recorded in the ledger as Label under Owner, with one
// ledger view per item of Views (its Parent is the pool), so a snapshot
// shows every buffer and a memset or copy that starts in a view must end in
// it. Views must lie inside the pool and not overlap. Freeing the pool frees
// its views. Reply: AllocReply, with the pool's pointer.
type AllocPool struct {
	Ctx   context.Context
	Owner string
	Label string
	Bytes int64
	Views []PoolView
	Reply chan<- AllocReply
}

// Free frees one allocation that Owner holds. Freeing a pointer the ledger does
// not know (a double free) gives gpuworker.ErrNotAllocated; one held by
// another owner gives gpuworker.ErrNotOwner; neither touches the backend.
// Reply: the error, nil on success.
type Free struct {
	Ctx   context.Context
	Owner string
	Ptr   DevicePtr
	Reply chan<- error
}

// FreeBatch frees every pointer in Ptrs, in order, keeping going after an
// error: one message for what would be len(Ptrs) Free requests. Reply:
// FreeBatchReply.
type FreeBatch struct {
	Ctx   context.Context
	Owner string
	Ptrs  []DevicePtr
	Reply chan<- FreeBatchReply
}

// FreeBatchReply answers FreeBatch: Failed are the pointers of Ptrs that are
// still held (in their order in Ptrs; all of them when the request was not
// started), Err the first error; both empty when every pointer was freed.
type FreeBatchReply struct {
	Failed []DevicePtr
	Err    error
}

// FreeOwner frees every allocation the ledger holds for Owner, newest first,
// keeping going after an error. Reply: FreeOwnerReply.
type FreeOwner struct {
	Ctx   context.Context
	Owner string
	Reply chan<- FreeOwnerReply
}

// FreeOwnerReply answers FreeOwner: how many allocations and bytes were freed,
// and the first error.
type FreeOwnerReply struct {
	Freed int
	Bytes int64
	Err   error
}

// Memset sets Bytes bytes at Ptr to Value. Reply: the error.
type Memset struct {
	Ctx   context.Context
	Ptr   DevicePtr
	Value byte
	Bytes int64
	Reply chan<- error
}

// CopyHtoD copies Src to device memory at Dst. Reply: the error.
type CopyHtoD struct {
	Ctx   context.Context
	Dst   DevicePtr
	Src   []byte
	Reply chan<- error
}

// CopyDtoH reads Bytes bytes of device memory at Src. Reply: CopyDtoHReply.
type CopyDtoH struct {
	Ctx   context.Context
	Src   DevicePtr
	Bytes int64
	Reply chan<- CopyDtoHReply
}

// CopyDtoHReply answers CopyDtoH with the bytes read.
type CopyDtoHReply struct {
	Data []byte
	Err  error
}

// CopyDtoD copies Bytes bytes from Src to Dst on the device. Reply: the error.
type CopyDtoD struct {
	Ctx   context.Context
	Dst   DevicePtr
	Src   DevicePtr
	Bytes int64
	Reply chan<- error
}

// MemInfo asks the device's free and total memory (cuMemGetInfo). Reply:
// MemInfoReply.
type MemInfo struct {
	Ctx   context.Context
	Reply chan<- MemInfoReply
}

// MemInfoReply answers MemInfo, in bytes.
type MemInfoReply struct {
	FreeBytes  int64
	TotalBytes int64
	Err        error
}

// Forward runs Step on the GPU actor's thread with a Device handle that is
// valid only while Step runs. The GPU actor's mailbox runs one message at a
// time, so two forward steps never overlap. Reply: ForwardReply.
type Forward struct {
	Ctx   context.Context
	Step  func(Device) error
	Reply chan<- ForwardReply
}

// ForwardReply answers Forward: Step's error and how long Step ran.
type ForwardReply struct {
	Duration time.Duration
	Err      error
}

// Ping asks the GPU actor for nothing: it answers at once, without calling
// the backend. It measures the round trip to the GPU thread (benchmarks) and
// tells whether the worker still serves requests. Reply: nil, the context's
// error when it was done before the actor got to it, or the backend-panic
// error once the worker has stopped serving.
type Ping struct {
	Ctx   context.Context
	Reply chan<- error
}

// LedgerSnapshot asks for a copy of the ledger; it is answered even after a
// backend panic, and carries no context (reading the ledger changes
// nothing). Reply: Ledger.
type LedgerSnapshot struct {
	Reply chan<- Ledger
}

// Stats asks the GPU actor how it has run; like LedgerSnapshot it carries no
// context. Reply: WorkerStats.
type Stats struct {
	Reply chan<- WorkerStats
}

// WorkerStats answers Stats.
type WorkerStats struct {
	// ThreadIDs are the distinct OS thread ids (gettid) that ran the GPU
	// actor's messages; exactly one when the pinned dispatcher works.
	ThreadIDs []int
	// Messages is the number of requests handled.
	Messages uint64
	// Backend names the backend ("hostsim", "cuda").
	Backend string
}
