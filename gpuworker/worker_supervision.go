package gpuworker

import (
	"context"
	"errors"

	"github.com/gpuarena/gpuarena/messages"
)

// Typed calls for the supervisors' bookkeeping (messages/supervision.go).

// AddView records view as a view of the allocation at parent, held by owner;
// see messages.AddView.
func (w *Worker) AddView(ctx context.Context, owner string, parent messages.DevicePtr, view messages.PoolView) error {
	reply := make(chan error, 1)
	r, err := ask(ctx, w, &messages.AddView{Ctx: ctx, Owner: owner, Parent: parent, View: view, Reply: reply}, reply)
	return errors.Join(err, r)
}

// RetireOwners records owners as retired in the ledger; see
// messages.RetireOwners.
func (w *Worker) RetireOwners(ctx context.Context, owners []string) error {
	reply := make(chan error, 1)
	r, err := ask(ctx, w, &messages.RetireOwners{Ctx: ctx, Owners: owners, Reply: reply}, reply)
	return errors.Join(err, r)
}
