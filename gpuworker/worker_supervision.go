package gpuworker

import (
	"context"
	"errors"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// Typed calls for the supervisors' bookkeeping
// (internal/messages/supervision.go). They are the arena, slab and release
// supervisors' (package actors), exported for them and the module's tests;
// the owners device.ArenaOwner and device.SlabOwner(name) are reserved for
// the supervisors.

// AddView records view as a view of the allocation at parent, held by owner;
// see messages.AddView. Its view is of gpuarena's internal package messages,
// so code outside the module cannot call it with one.
func (w *Worker) AddView(ctx context.Context, owner string, parent device.DevicePtr, view messages.PoolView) error {
	r, err := addViews.ask(ctx, w, messages.AddView{Ctx: ctx, Owner: owner, Parent: parent, View: view})
	return errors.Join(err, r)
}

// RetireOwners records owners as retired in the ledger
// (device.Ledger.Retired), and frees nothing; see messages.RetireOwners.
func (w *Worker) RetireOwners(ctx context.Context, owners []string) error {
	r, err := ownerRetirements.ask(ctx, w, messages.RetireOwners{Ctx: ctx, Owners: owners})
	return errors.Join(err, r)
}

// RestoreOwners takes owners off the ledger's retired list
// (device.Ledger.Retired): a released arena's owner, when its manager is
// reset to build again. It frees and allocates nothing.
func (w *Worker) RestoreOwners(ctx context.Context, owners []string) error {
	r, err := ownerRetirements.ask(ctx, w, messages.RetireOwners{Ctx: ctx, Owners: owners, Restore: true})
	return errors.Join(err, r)
}
