package gpuworker

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// AllocBatchChecked allocates every item (for owner, unless the item names
// its own), records their views and zero-fills their zero ranges, or does
// none of it, in one request, as AllocBatch does without a tag; and it
// checks the whole batch against the budget first: a batch whose bytes
// together would pass it is refused with an *OutOfMemoryError labelled what
// (OverBudget, ShortfallBytes), and the backend is never called. It is the
// path of the manager's own all-or-nothing allocations (the KV cache).
//
// The wait for the reply is not cut short by ctx: the actor refuses the
// request when ctx is done before it starts it, and otherwise its pointers
// come back, so nothing allocated is lost. Errors: ErrInvalidValue for an
// empty what or a bad item; those of AllocBatch.
func (w *Worker) AllocBatchChecked(ctx context.Context, owner, what string, items []messages.AllocItem) ([]device.DevicePtr, error) {
	if what == "" {
		return nil, fmt.Errorf("alloc batch for %q: %w: name what the batch is", owner, ErrInvalidValue)
	}
	r, err := allocBatches.ask(context.Background(), w, messages.AllocBatch{Ctx: ctx, Owner: owner, Items: items, Preflight: what})
	return r.Ptrs, errors.Join(err, r.Err)
}
