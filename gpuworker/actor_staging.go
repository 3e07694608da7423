package gpuworker

import (
	"errors"
	"fmt"

	"github.com/gpuarena/gpuarena/internal/messages"
)

// stagingAlloc makes a weights load's staging buffers: page-locked through
// the backend's StagingUploader when it has one, else Go memory. It is all
// or nothing: a failure frees the buffers made before it.
func (a *gpuActor) stagingAlloc(m *messages.StagingAlloc) messages.StagingAllocReply {
	if err := a.usable(m.Ctx); err != nil {
		return messages.StagingAllocReply{Err: err}
	}
	if m.Count <= 0 || m.Bytes <= 0 {
		return messages.StagingAllocReply{Err: fmt.Errorf("staging buffers: %w: %d of %d B; both must be > 0", ErrInvalidValue, m.Count, m.Bytes)}
	}
	up, ok := a.backend.(StagingUploader)
	if !ok {
		bufs := make([][]byte, m.Count)
		for i := range bufs {
			bufs[i] = make([]byte, m.Bytes)
		}
		return messages.StagingAllocReply{Buffers: bufs}
	}
	bufs := make([][]byte, 0, m.Count)
	for range m.Count {
		var buf []byte
		err := a.guard("alloc staging", "", func() (err error) {
			buf, err = up.AllocStaging(m.Bytes)
			return err
		})
		if err != nil {
			ferr := a.freeStaging(up, bufs)
			return messages.StagingAllocReply{Err: errors.Join(fmt.Errorf("staging buffer %d of %d (%d B page-locked): %w", len(bufs)+1, m.Count, m.Bytes, err), ferr)}
		}
		bufs = append(bufs, buf)
	}
	return messages.StagingAllocReply{Buffers: bufs, Pinned: true}
}

// stagingFree frees page-locked staging buffers; Go buffers are the
// garbage collector's.
func (a *gpuActor) stagingFree(m *messages.StagingFree) error {
	if !m.Pinned {
		return nil
	}
	up, ok := a.backend.(StagingUploader)
	if !ok {
		return fmt.Errorf("free staging: %w: the backend has no page-locked buffers", ErrNotAllocated)
	}
	return a.freeStaging(up, m.Buffers)
}

// freeStaging frees every buffer, going on after a failure, and returns the
// failures joined.
func (a *gpuActor) freeStaging(up StagingUploader, bufs [][]byte) error {
	var errs []error
	for _, b := range bufs {
		if err := a.guard("free staging", "", func() error { return up.FreeStaging(b) }); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// copyHtoDStaged starts the copies of one staging buffer, each segment
// checked against the ledger first (the first failure ends the batch), then
// waits for the copies from m.Wait. From page-locked buffers the copies are
// asynchronous on the backend's upload stream (StagingUploader); from Go
// memory they are synchronous and there is nothing to wait for.
func (a *gpuActor) copyHtoDStaged(m *messages.CopyHtoDStaged) error {
	if err := a.usable(m.Ctx); err != nil {
		return err
	}
	up, async := a.backend.(StagingUploader)
	for i, s := range m.Segments {
		var err error
		if !async {
			err = a.ops.CopyHtoD(s.Dst, s.Src)
		} else if err = a.ops.check("copy host→device", s.Dst, int64(len(s.Src))); err == nil {
			err = a.guard("copy host→device", "", func() error { return up.CopyHtoDAsync(s.Dst, s.Src) })
		}
		if err != nil {
			return fmt.Errorf("segment %d of %d (%d B at %#x): %w", i+1, len(m.Segments), len(s.Src), uint64(s.Dst), err)
		}
	}
	if !async {
		return nil
	}
	if len(m.Segments) > 0 {
		if err := a.guard("mark staging", "", func() error { return up.MarkStaging(m.Buffer) }); err != nil {
			return err
		}
	}
	if m.Wait != nil {
		return a.guard("wait staging", "", func() error { return up.WaitStaging(m.Wait) })
	}
	return nil
}
