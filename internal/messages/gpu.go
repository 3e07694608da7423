package messages

import (
	"context"
	"time"

	"github.com/gpuarena/gpuarena/device"
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
	Ptr device.DevicePtr
	Err error
}

// AllocItem is one allocation of an AllocBatch: Bytes bytes (> 0), recorded
// in the ledger as Label under Owner ("" is the batch's Owner). Views are the
// buffers inside it, when it is a pool: each becomes a ledger view (its
// Parent is the pool), so a snapshot shows every buffer and a memset or copy
// that starts in a view must end in it; views must be non-empty, in
// increasing offset order, inside the allocation and not overlap, and they
// are freed with it. Zero are byte ranges of it set to zero once every item
// of the batch is allocated (the arena's zero-filled buffers,
// arena.BufferID.ZeroFill).
type AllocItem struct {
	Owner string
	Label string
	Bytes int64
	Views []PoolView
	Zero  []ByteRange
}

// ByteRange is Bytes bytes at Offset bytes into an allocation.
type ByteRange struct {
	Offset int64
	Bytes  int64
}

// AllocBatch asks for every item or none, in one request: the allocations,
// their views, the zero-fills and the tag succeed together, or whatever was
// allocated is freed before the reply and the ledger is where it was.
//
// Tag, when not nil, runs on the GPU thread once every item is allocated and
// zero-filled, with the items' pointers in order; what it returns is set as
// the Tag of every allocation of the batch (not of its views), before the
// reply. The arena supervisor tags a built arena's pool or buffers and its
// slabs with the *Arena, so that a restarted supervisor finds the built
// arena in the ledger, and a build is in the ledger whole or not at all.
// Tag must not block or call the worker; a panic in it fails the batch with
// gpuworker.ErrTagPanic. Reply: AllocBatchReply.
//
// Preflight, when not empty, checks the whole batch against the budget
// before the first allocation: a batch whose bytes together would pass it
// is refused with a *gpuworker.OutOfMemoryError labelled Preflight, and the
// backend is never called. Without it each item is checked as it comes (an
// arena build), so a later item's refusal rolls back the earlier ones.
type AllocBatch struct {
	Ctx       context.Context
	Owner     string
	Items     []AllocItem
	Tag       func(ptrs []device.DevicePtr) any
	Preflight string
	Reply     chan<- AllocBatchReply
}

// AllocBatchReply answers AllocBatch: one pointer per item, in order, and
// Tag's result; or an error naming the item that failed (and nil Ptrs):
// gpuworker.ErrOutOfMemory wrapped in a *gpuworker.OutOfMemoryError,
// gpuworker.ErrInvalidValue for a size ≤ 0 or a bad view or zero range, the
// backend's error, gpuworker.ErrTagPanic, or the context's error when it was
// done before the work started.
type AllocBatchReply struct {
	Ptrs []device.DevicePtr
	Tag  any
	Err  error
}

// PoolView is one buffer inside a pool allocation: its label and its byte
// range within the pool.
type PoolView struct {
	Label  string
	Offset int64
	Bytes  int64
}

// Free frees one allocation that Owner holds. Freeing a pointer the ledger does
// not know (a double free) gives gpuworker.ErrNotAllocated; one held by
// another owner gives gpuworker.ErrNotOwner; neither touches the backend.
// Reply: the error, nil on success.
type Free struct {
	Ctx   context.Context
	Owner string
	Ptr   device.DevicePtr
	Reply chan<- error
}

// FreeBatch frees every pointer in Ptrs, in order, keeping going after an
// error: one message for what would be len(Ptrs) Free requests. Reply:
// FreeBatchReply.
type FreeBatch struct {
	Ctx   context.Context
	Owner string
	Ptrs  []device.DevicePtr
	Reply chan<- FreeBatchReply
}

// FreeBatchReply answers FreeBatch: Failed are the pointers of Ptrs that are
// still held (in their order in Ptrs; all of them when the request was not
// started), Err the first error; both empty when every pointer was freed.
type FreeBatchReply struct {
	Failed []device.DevicePtr
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
	Ptr   device.DevicePtr
	Value byte
	Bytes int64
	Reply chan<- error
}

// CopyHtoD copies Src to device memory at Dst. Reply: the error.
type CopyHtoD struct {
	Ctx   context.Context
	Dst   device.DevicePtr
	Src   []byte
	Reply chan<- error
}

// HostSegment is one host→device copy of a CopyHtoDStaged: Src to Dst.
type HostSegment struct {
	Dst device.DevicePtr
	Src []byte
}

// StagingUnregister unlocks staging buffers CopyHtoDStaged page-locked,
// each once the copies started from it are done; the memory stays the
// caller's, to unmap after the reply. Buffers may be empty: the reply then
// only says that the GPU thread is done with the caller's earlier requests.
// Reply: the errors joined; the GPU thread tries every buffer whatever the
// others give.
type StagingUnregister struct {
	Buffers [][]byte
	Reply   chan<- error
}

// CopyHtoDStaged moves one staging buffer of a weights load through the
// GPU thread, in this order: when Register, it page-locks Buffer (host
// memory outside the Go heap that the loader mapped, owns and has touched
// every page of: its first copy); it starts the copies of Buffer's
// segments, in order, each checked against the ledger as a Device copy is
// (the first failure stops the batch); it waits until the copies from
// Wait, a buffer an earlier CopyHtoDStaged started, are done, so Wait may
// be refilled; and when UnregisterWait, it then unlocks Wait, which the
// load needs no more. Segments may be empty and Buffer nil (only wait);
// Wait may be nil (only start). From memory the backend does not lock the
// copies are done before the reply. Reply: CopyHtoDStagedReply.
type CopyHtoDStaged struct {
	Ctx            context.Context
	Buffer         []byte
	Register       bool
	Segments       []HostSegment
	Wait           []byte
	UnregisterWait bool
	Reply          chan<- CopyHtoDStagedReply
}

// CopyHtoDStagedReply answers CopyHtoDStaged. Pinned, for a Register
// request, says Buffer is, or may be, page-locked: the backend locked it,
// or the GPU thread could not finish the request (Fail); such a buffer is
// unlocked (UnregisterWait, StagingUnregister) before it is unmapped. A
// backend without page-locked staging answers false, and so does a
// request refused before any work. Err names the step that failed (the
// segment, the lock, the wait).
type CopyHtoDStagedReply struct {
	Pinned bool
	Err    error
}

// CopyDtoH reads Bytes bytes of device memory at Src. Reply: CopyDtoHReply.
type CopyDtoH struct {
	Ctx   context.Context
	Src   device.DevicePtr
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
	Dst   device.DevicePtr
	Src   device.DevicePtr
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
	Step  func(device.Device) error
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
// nothing). Reply: device.Ledger.
type LedgerSnapshot struct {
	Reply chan<- device.Ledger
}

// Stats asks the GPU actor how it has run; like LedgerSnapshot it carries no
// context. Reply: device.Stats.
type Stats struct {
	Reply chan<- device.Stats
}
