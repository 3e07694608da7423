package gpuworker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// DefaultLoadChunkBytes is the size of one staging buffer of a weights load
// when LoadOptions.ChunkBytes is 0: 4 MiB. On the H200 host of
// docs/performance/weights-load.md, 16 readers loaded a 16 GB checkpoint at 49.0
// GB/s with 4 MiB chunks, 46.5 with 2 MiB (more round trips to the GPU
// thread) and 49.2 with 8 MiB (twice the staging to fault in and lock:
// 12.0 ms of setup against 8.4): the Readers + 2 buffers should stay
// small, and a chunk's round trip to the GPU thread small next to its copy.
const DefaultLoadChunkBytes = 4 << 20

// MaxLoadChunkBytes is the largest LoadOptions.ChunkBytes: 1 GiB.
const MaxLoadChunkBytes = 1 << 30

// DefaultLoadReaders is the number of goroutines that read a checkpoint in
// parallel when LoadOptions.Readers is 0: 16. One reader's pread from the
// page cache is one memory copy by one core, against a host-to-device link
// of 55 GB/s on the H200 host of docs/performance/weights-load.md (where 16
// readers read at 82.2 GB/s); there
// a 16 GB load ran at 44.4 GB/s with 8 readers, 47.9 with 12, 49.0 with
// 16 and 49.1 with 24 (their staging grows with them: 10.1 ms of setup
// against 8.4). A reader blocked in pread holds an OS thread, not a core,
// so the default does not depend on the cores.
const DefaultLoadReaders = 16

// MaxLoadReaders is the largest LoadOptions.Readers.
const MaxLoadReaders = 64

// LoadOptions configure Worker.LoadWeights; the zero value takes every
// default.
type LoadOptions struct {
	// Layout is device.LayoutPooled ("" too: one allocation, each tensor a
	// 256-byte-aligned view) or device.LayoutDiscrete (one allocation per
	// tensor).
	Layout device.Layout
	// ChunkBytes is the size of each host staging buffer, in bytes, in
	// [0, MaxLoadChunkBytes]; 0 means DefaultLoadChunkBytes. A load holds
	// Readers + 2 of them (page-locked on the cuda backend).
	ChunkBytes int64
	// Readers is the number of goroutines reading chunks from the files
	// in parallel, in [0, MaxLoadReaders]; 0 means DefaultLoadReaders.
	Readers int
	// Progress, when not nil, is called on the loading goroutine after each
	// chunk reached the device. It may cancel the load's context; the load
	// stops before the next chunk.
	Progress func(device.LoadProgress)
}

// Validate returns ErrInvalidValue, naming the option, for a layout other
// than "", device.LayoutPooled and device.LayoutDiscrete, or a ChunkBytes
// outside [0, MaxLoadChunkBytes]; nil otherwise.
func (o LoadOptions) Validate() error {
	switch {
	case o.Layout != "" && o.Layout != device.LayoutPooled && o.Layout != device.LayoutDiscrete:
		return fmt.Errorf("load weights: layout %q: %w: use %q or %q", o.Layout, ErrInvalidValue, device.LayoutPooled, device.LayoutDiscrete)
	case o.ChunkBytes < 0 || o.ChunkBytes > MaxLoadChunkBytes:
		return fmt.Errorf("load weights: chunk of %d B: %w: must be in [0, %d] (0: the default, %d)", o.ChunkBytes, ErrInvalidValue, MaxLoadChunkBytes, DefaultLoadChunkBytes)
	case o.Readers < 0 || o.Readers > MaxLoadReaders:
		return fmt.Errorf("load weights: %d readers: %w: must be in [0, %d] (0: the default, %d)", o.Readers, ErrInvalidValue, MaxLoadReaders, DefaultLoadReaders)
	}
	return nil
}

// piece is the part of one tensor a chunk carries: n bytes read from
// offset src of the file's tensor, for offset off of device tensor t, at
// offset at of the staging buffer.
type piece struct {
	t           int
	off, src, n int64
	at          int64
}

// filled is a staging buffer the reader filled with chunk k (or failed to).
type filled struct {
	k   int
	buf *stagingBuffer
	err error
}

// LoadWeights allocates every tensor of ck on the device, held by
// device.WeightsOwner, and copies the tensors' bytes there, and returns
// where each tensor is.
//
// The allocation is one request to the GPU actor, all or nothing, checked
// whole against the budget before the backend is called: a checkpoint that
// would pass the budget is refused with an *OutOfMemoryError (OverBudget,
// ShortfallBytes: how much more it needs) and nothing is allocated. The
// bytes then go up in chunks of opts.ChunkBytes through Readers + 2 host
// staging buffers, one anonymous mapping the load makes (huge pages asked
// for on Linux): Readers goroutines pread chunks from the files
// (checkpoint.Section) in parallel, never a whole file into the Go heap,
// while the GPU thread copies the chunks already read (one request per
// chunk, each piece checked against the ledger). On the cuda backend the
// staging buffers are page-locked (cuMemHostRegister, StagingUploader) one
// by one as the readers first take them, each after its reader has touched
// its pages, and the copies are asynchronous on a stream of the backend's,
// so reading and copying overlap; elsewhere nothing is locked and the
// copies are synchronous. The Progress callback counts a chunk once its
// copy is done.
//
// ctx is checked before the allocation and between chunks. A load that
// stops — ctx done (the Progress callback may cancel it), a read that
// fails, a buffer that cannot be locked, a copy that fails — frees
// everything it allocated, so the ledger is back where it was, and returns
// an error that says so and wraps the cause (the context's error,
// checkpoint.ErrTruncated or checkpoint.ErrRead for a file that changed
// since Open, the backend's error for a buffer or a copy). The staging is
// unlocked and unmapped whatever the outcome; an unlock that fails is
// joined to the error, and leaves the staging mapped (the driver may still
// hold it). Other errors: ErrInvalidValue for a nil checkpoint or a bad
// option; ErrClosed; ErrReentrant.
func (w *Worker) LoadWeights(ctx context.Context, ck *checkpoint.Checkpoint, opts LoadOptions) (*device.Weights, error) {
	if ck == nil {
		return nil, fmt.Errorf("load weights: %w: nil checkpoint", ErrInvalidValue)
	}
	tensors := ck.Tensors()
	ranges := make([][]arena.ByteRange, len(tensors))
	for i, t := range tensors {
		ranges[i] = []arena.ByteRange{{Offset: 0, Bytes: t.Bytes}}
	}
	return w.load(ctx, ck, tensors, ranges, opts)
}

// load is LoadWeights of the device tensors tensors (each its name in ck,
// dtype, shape and bytes on the device), tensor i's bytes being ranges[i]
// of ck's tensor of that name, back to back.
func (w *Worker) load(ctx context.Context, ck *checkpoint.Checkpoint, tensors []checkpoint.Tensor, ranges [][]arena.ByteRange, opts LoadOptions) (_ *device.Weights, err error) {
	start := time.Now()
	if err := w.CheckCaller(); err != nil {
		return nil, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	layout := opts.Layout
	if layout == "" {
		layout = device.LayoutPooled
	}
	if opts.ChunkBytes == 0 {
		opts.ChunkBytes = DefaultLoadChunkBytes
	}
	if opts.Readers == 0 {
		opts.Readers = DefaultLoadReaders
	}
	wt, items, total, err := weightLayout(tensors, layout)
	if err != nil {
		return nil, err
	}
	zeroPastRanges(items, wt, ranges, layout)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("load weights: nothing allocated: %w", err)
	}
	var ptrs []device.DevicePtr
	if len(items) > 0 {
		preflight := fmt.Sprintf("weights (%d tensors, %d B in %d allocation(s))", len(tensors), total, len(items))
		// The wait is not cut short by ctx: the actor refuses the request
		// if ctx is done when it gets to it, and otherwise its pointers
		// must come back here to be freed should the load stop.
		r, err := allocBatches.ask(context.Background(), w, messages.AllocBatch{Ctx: ctx, Owner: device.WeightsOwner, Items: items, Preflight: preflight})
		if err = errors.Join(err, r.Err); err != nil {
			return nil, fmt.Errorf("load weights: nothing allocated: %w", err)
		}
		ptrs = r.Ptrs
	}
	var pool device.DevicePtr
	var poolBytes int64
	if layout == device.LayoutPooled && len(ptrs) == 1 {
		pool, poolBytes = ptrs[0], items[0].Bytes
		for i := range wt {
			if wt[i].Bytes > 0 {
				wt[i].Ptr += pool // the offset in the pool, until now
			}
		}
	} else {
		k := 0
		for i := range wt {
			if wt[i].Bytes > 0 {
				wt[i].Ptr = ptrs[k]
				k++
			}
		}
	}
	weights := device.NewWeights(layout, pool, poolBytes, wt)
	uploaded := false
	defer func() {
		// A Progress callback that panics (or calls runtime.Goexit) leaves
		// nothing allocated either; the panic goes on.
		if !uploaded && err == nil {
			_, _ = w.FreeBatch(context.Background(), device.WeightsOwner, ptrs)
		}
	}()
	err = ctx.Err()
	if err == nil {
		err = w.upload(ctx, ck, weights, ranges, opts, opts.Progress)
	}
	uploaded = err == nil
	if err != nil {
		_, ferr := w.FreeBatch(context.Background(), device.WeightsOwner, ptrs)
		what := fmt.Sprintf("freed the %d allocation(s) it made (%d B); the ledger is back where it was", len(ptrs), weights.AllocatedBytes)
		if ferr != nil {
			what = fmt.Sprintf("and freeing its %d allocation(s) failed too (%v); Release or Close frees what is left", len(ptrs), ferr)
		}
		return nil, fmt.Errorf("load weights: stopped, %s: %w", what, err)
	}
	weights.Load = time.Since(start)
	return weights, nil
}

// weightLayout places the tensors: pooled, each non-empty tensor a view of
// one item at an arena.PoolAlign-aligned offset (the tensors' Ptr set to
// that offset); discrete, one item per non-empty tensor. Tensors of 0 bytes
// get no memory and a NULL pointer. It returns the items' total bytes too.
// Errors: ErrInvalidValue wrapping an *arena.OverflowError when the
// (aligned) total passes 2^63−1.
func weightLayout(tensors []checkpoint.Tensor, layout device.Layout) ([]device.WeightTensor, []messages.AllocItem, int64, error) {
	wt := make([]device.WeightTensor, len(tensors))
	var items []messages.AllocItem
	var pool messages.AllocItem
	var offsets []int64
	var total int64
	var err error
	if layout == device.LayoutDiscrete {
		if total, err = arena.CheckedSum("weights total", TensorBytes(tensors)...); err != nil {
			return nil, nil, 0, fmt.Errorf("load weights: %w: %w", ErrInvalidValue, err)
		}
	} else {
		if offsets, pool.Bytes, err = arena.PoolOffsets(TensorBytes(tensors)); err != nil {
			return nil, nil, 0, fmt.Errorf("load weights: %w: weights pool: %w", ErrInvalidValue, err)
		}
		total = pool.Bytes
	}
	for i, t := range tensors {
		wt[i] = device.WeightTensor{Name: t.Name, DType: t.DType, Shape: t.Shape, Bytes: t.Bytes}
		if t.Bytes == 0 {
			continue
		}
		if layout == device.LayoutDiscrete {
			items = append(items, messages.AllocItem{Label: t.Name, Bytes: t.Bytes})
			continue
		}
		wt[i].Ptr = device.DevicePtr(offsets[i])
		pool.Views = append(pool.Views, messages.PoolView{Label: t.Name, Offset: offsets[i], Bytes: t.Bytes})
	}
	if layout == device.LayoutPooled && pool.Bytes > 0 {
		pool.Label = device.WeightsPoolLabel
		items = append(items, pool)
	}
	return wt, items, total, nil
}

// TensorBytes is the tensors' sizes in bytes, in order: what
// arena.PooledBytes and arena.FitOptions.CheckpointPooledTensorBytes take.
func TensorBytes(tensors []checkpoint.Tensor) []int64 {
	out := make([]int64, len(tensors))
	for i, t := range tensors {
		out[i] = t.Bytes
	}
	return out
}

// chunks cuts the byte ranges of the tensors, in order, into chunks of at
// most size bytes: ranges[i] are read from the file's tensor i and land
// back to back from the device tensor's first byte; a range larger than a
// chunk spans several, small ones (a dim-1 slice's rows) share one. It
// returns the bytes of all the ranges too.
func chunks(ranges [][]arena.ByteRange, size int64) ([][]piece, int64) {
	var out [][]piece
	var cur []piece
	var used, total int64
	for i, rs := range ranges {
		var dst int64
		for _, r := range rs {
			for off := int64(0); off < r.Bytes; {
				if used == size {
					out, cur, used = append(out, cur), nil, 0
				}
				n := min(r.Bytes-off, size-used)
				cur = append(cur, piece{t: i, off: dst + off, src: r.Offset + off, n: n, at: used})
				off, used = off+n, used+n
			}
			dst += r.Bytes
			total += r.Bytes
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out, total
}

// upload copies every tensor's bytes to the device through Readers + 2
// host staging buffers (at most one per chunk), one mapping that upload
// makes and unmaps (stagingSet). readers goroutines pread chunks into free
// buffers in parallel, a buffer's first reader writing its pages first;
// this goroutine hands each filled buffer to the GPU thread
// (CopyHtoDStaged), which starts its copies and then waits for the copies
// of the buffer handed before it, which goes back to the readers. On a
// backend with page-locked staging (StagingUploader: cuda) the copies are
// asynchronous, so the device copies one chunk while the readers fill the
// next ones and the GPU thread takes the next request; on others nothing
// is locked and each copy is done before its reply.
//
// The GPU thread page-locks each buffer with its first copy, so the first
// copy starts after one buffer is locked, not all of them, and the locking
// of the others overlaps the copies before them; it unlocks each buffer
// once its last copy is done: when every chunk left has a buffer already
// (grants, below), a buffer whose copies are done is not needed again, and
// the request that waits for it unlocks it, overlapping the copies after
// it. upload returns when the readers have exited and every copy it
// started is done, and the buffers are unlocked and unmapped
// (stagingSet.release), whatever the outcome.
func (w *Worker) upload(ctx context.Context, ck *checkpoint.Checkpoint, weights *device.Weights, ranges [][]arena.ByteRange, o LoadOptions, progress func(device.LoadProgress)) (err error) {
	plan, total := chunks(ranges, o.ChunkBytes)
	if len(plan) == 0 {
		return nil
	}
	readers := min(o.Readers, len(plan))
	st, err := newStagingSet(min(readers+2, len(plan)), min(o.ChunkBytes, total))
	if err != nil {
		return err
	}
	defer func() {
		// After the readers have exited (the defer below runs first):
		// unlocking a buffer waits for its copies.
		err = errors.Join(err, st.release(w))
	}()
	free := make(chan *stagingBuffer, len(st.bufs))
	for _, b := range st.bufs {
		free <- b
	}
	// grants counts the buffers put in free: each is taken for one chunk,
	// so once it reaches len(plan) no buffer is needed again.
	grants := len(st.bufs)
	jobs := make(chan int, len(plan))
	for k := range plan {
		jobs <- k
	}
	close(jobs)
	full := make(chan filled, len(st.bufs))
	stop := make(chan struct{})
	var readersDone sync.WaitGroup
	for range readers {
		r := &chunkReader{ck: ck, weights: weights}
		readersDone.Go(func() { r.run(plan, jobs, free, full, stop) })
	}
	go func() {
		readersDone.Wait()
		close(full)
	}()
	defer func() {
		close(stop)
		for range full { // wait for the readers to exit
		}
	}()
	begin := time.Now()
	var done, started int64
	var inflight *stagingBuffer // the buffer whose copies the device may still be doing
	var inflightTensor string
	report := func(n int64, tensor string) {
		done += n
		if progress != nil {
			el := time.Since(begin)
			progress(device.LoadProgress{BytesDone: done, BytesTotal: total, Tensor: tensor,
				Elapsed: el, BytesPerSecond: float64(done) / max(el.Seconds(), 1e-9)})
		}
	}
	// send hands buf's segments (none: buf nil) to the GPU thread and waits
	// for inflight's copies, unlocking inflight when no chunk needs it.
	send := func(buf *stagingBuffer, segs []messages.HostSegment) error {
		m := messages.CopyHtoDStaged{Ctx: ctx, Segments: segs, Wait: inflight.memory(), UnregisterWait: inflight != nil && grants >= len(plan)}
		if buf != nil {
			m.Buffer, m.Register = buf.mem, !buf.asked
			buf.asked = true
		}
		// The wait is not cut short by ctx (the GPU thread refuses the
		// request if ctx is done when it gets to it, and a copy's wait is
		// one chunk's): which buffers are locked must be known.
		r, err := stagedCopies.ask(context.Background(), w, m)
		if err != nil && m.Register {
			r.Pinned = true // no reply: the GPU thread may have locked it
		}
		if m.Register && r.Pinned {
			buf.pinned = true
		}
		if err = errors.Join(err, r.Err); err != nil {
			return err
		}
		if inflight != nil {
			if m.UnregisterWait {
				inflight.pinned = false
			} else {
				free <- inflight
				grants++
			}
		}
		return nil
	}
	for f := range full {
		if f.err != nil {
			return f.err
		}
		c := plan[f.k]
		segs, n := segments(c, weights, f.buf.mem)
		last := weights.Tensors[c[len(c)-1].t].Name
		if err := send(f.buf, segs); err != nil {
			return fmt.Errorf("copy chunk %d of %d (ending in %s): %w", f.k+1, len(plan), last, err)
		}
		if inflight != nil {
			report(started, inflightTensor)
		}
		inflight, inflightTensor, started = f.buf, last, n
		if err := ctx.Err(); err != nil && done+started < total {
			return fmt.Errorf("cancelled after %d of %d B: %w", done+started, total, err)
		}
	}
	if err := send(nil, nil); err != nil {
		return fmt.Errorf("wait for the last chunk (ending in %s): %w", inflightTensor, err)
	}
	report(started, inflightTensor)
	return nil
}

// WeightsAllocatedBytes is what Worker.LoadWeights of ck with layout ("" is
// pooled) allocates on the device, in bytes: the pool (each non-empty tensor
// at a 256-byte-aligned offset, the end rounded up to 256 B), or the sum of
// the tensors for the discrete layout. A preflight counts it. Errors:
// ErrInvalidValue for a nil checkpoint, a bad layout, or a total past
// 2^63−1 bytes.
func WeightsAllocatedBytes(ck *checkpoint.Checkpoint, layout device.Layout) (int64, error) {
	if ck == nil {
		return 0, fmt.Errorf("weights bytes: %w: nil checkpoint", ErrInvalidValue)
	}
	if err := (LoadOptions{Layout: layout}).Validate(); err != nil {
		return 0, err
	}
	if layout == "" {
		layout = device.LayoutPooled
	}
	_, _, total, err := weightLayout(ck.Tensors(), layout)
	return total, err
}
