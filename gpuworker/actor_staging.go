package gpuworker

import (
	"errors"
	"fmt"

	"github.com/gpuarena/gpuarena/internal/messages"
)

// stagingUnregister unlocks every buffer of m, each after its copies are
// done, going on after a failure, and returns the failures joined. It runs
// whatever the actor's state: a buffer left locked is host memory lost
// until the backend closes.
func (a *gpuActor) stagingUnregister(m *messages.StagingUnregister) error {
	if len(m.Buffers) == 0 {
		return nil
	}
	up, ok := a.backend.(StagingUploader)
	if !ok {
		return fmt.Errorf("unregister staging: %w: the backend page-locks no staging buffers (%d asked)", ErrNotAllocated, len(m.Buffers))
	}
	var errs []error
	for i, b := range m.Buffers {
		if err := a.unregisterStaging(up, b); err != nil {
			errs = append(errs, fmt.Errorf("staging buffer %d of %d: %w", i+1, len(m.Buffers), err))
		}
	}
	return errors.Join(errs...)
}

// unregisterStaging unlocks one staging buffer (StagingUploader.UnregisterStaging).
func (a *gpuActor) unregisterStaging(up StagingUploader, buf []byte) error {
	if err := a.guard("unregister staging", "", func() error { return up.UnregisterStaging(buf) }); err != nil {
		return fmt.Errorf("unlock a staging buffer of %d B: %w", len(buf), err)
	}
	return nil
}

// copyHtoDStaged carries out a CopyHtoDStaged: it page-locks the buffer
// when asked (the backend's StagingUploader; on another backend there is
// nothing to lock), starts the buffer's copies, each segment checked
// against the ledger first (the first failure ends the batch), waits for
// the copies from m.Wait and unlocks m.Wait when asked. From page-locked
// buffers the copies are asynchronous on the backend's upload stream, and
// the buffer is marked after the copies it started, even when a later
// segment failed, so that waiting for it or unlocking it waits for them;
// from memory the backend did not lock they are synchronous and there is
// nothing to wait for or unlock.
func (a *gpuActor) copyHtoDStaged(m *messages.CopyHtoDStaged) messages.CopyHtoDStagedReply {
	if err := a.usable(m.Ctx); err != nil {
		return messages.CopyHtoDStagedReply{Err: err}
	}
	up, async := a.backend.(StagingUploader)
	if m.Register && async {
		if len(m.Buffer) == 0 {
			return messages.CopyHtoDStagedReply{Err: fmt.Errorf("register staging: %w: empty buffer; size must be > 0", ErrInvalidValue)}
		}
		if err := a.guard("register staging", "", func() error { return up.RegisterStaging(m.Buffer) }); err != nil {
			return messages.CopyHtoDStagedReply{Err: fmt.Errorf("page-lock a staging buffer of %d B: %w", len(m.Buffer), err)}
		}
	}
	reply := messages.CopyHtoDStagedReply{Pinned: m.Register && async}
	started := 0
	for i, s := range m.Segments {
		var err error
		if !async {
			err = a.ops.CopyHtoD(s.Dst, s.Src)
		} else if err = a.ops.check("copy host→device", s.Dst, int64(len(s.Src))); err == nil {
			err = a.guard("copy host→device", "", func() error { return up.CopyHtoDAsync(s.Dst, s.Src) })
		}
		if err != nil {
			reply.Err = fmt.Errorf("segment %d of %d (%d B at %#x): %w", i+1, len(m.Segments), len(s.Src), uint64(s.Dst), err)
			break
		}
		started++
	}
	if !async {
		return reply
	}
	if started > 0 {
		if err := a.guard("mark staging", "", func() error { return up.MarkStaging(m.Buffer) }); err != nil {
			reply.Err = errors.Join(reply.Err, err)
		}
	}
	if reply.Err != nil || m.Wait == nil {
		return reply
	}
	if err := a.guard("wait staging", "", func() error { return up.WaitStaging(m.Wait) }); err != nil {
		reply.Err = err
		return reply
	}
	if m.UnregisterWait {
		reply.Err = a.unregisterStaging(up, m.Wait)
	}
	return reply
}
