package gpuworker

import (
	"fmt"

	"github.com/gpuarena/gpuarena/internal/messages"
)

// The supervisors' bookkeeping (internal/messages/supervision.go): it
// records in the ledger what a restarted supervisor needs, and never calls
// the backend.

// addView records a view of a live allocation held by m.Owner, after checking
// that it lies inside the allocation and overlaps none of its views.
func (a *gpuActor) addView(m *messages.AddView) error {
	if err := a.usable(m.Ctx); err != nil {
		return err
	}
	e, err := a.ledger.lookup(m.Parent, m.Owner)
	if err != nil {
		return fmt.Errorf("add view %s: %w", m.View.Label, err)
	}
	if err := a.ledger.addView(e, m.View); err != nil {
		return fmt.Errorf("add view: %w", err)
	}
	return nil
}

// retireOwners records m.Owners as retired (with m.Restore, takes them off
// the retired list). It does not refuse after a
// backend panic: it touches only the ledger, and a consistent ledger is what
// teardown needs.
//
// A retirement is the first step of a release: the frees of what was retired
// follow within microseconds, through the slab and release supervisors
// (messages.Release). So the GPU thread expects them: it spins for them
// rather than parking (pinned.Dispatcher.Expect).
func (a *gpuActor) retireOwners(m *messages.RetireOwners) error {
	if m.Ctx != nil && m.Ctx.Err() != nil {
		return m.Ctx.Err()
	}
	if m.Restore {
		a.ledger.restore(m.Owners)
		return nil
	}
	a.ledger.retire(m.Owners)
	a.dispatcher.Expect()
	return nil
}
