package gpuarena

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/gpuarena/gpuarena/device"
)

// ErrReservedOwner is wrapped by the *OwnerError of an Alloc, Free or
// FreeOwner that names an owner the manager keeps for itself
// (device.ReservedOwner).
var ErrReservedOwner = errors.New("ledger owner is reserved by the manager")

// OwnerError is the error of a call that names an owner it may not use: one
// the manager reserves (device.ArenaOwner, device.WeightsOwner,
// device.KVCacheOwner, "slab/…"). errors.Is(err, ErrReservedOwner) and
// errors.Is(err, ErrInvalidValue) hold.
type OwnerError struct {
	// Op is the call: "alloc", "free" or "free owner".
	Op string
	// Owner is the owner asked for.
	Owner string
}

// Error says what was asked and what to change.
func (e *OwnerError) Error() string {
	return fmt.Sprintf("%s: owner %q is reserved by the manager (arena, slab/…, weights, kv_cache): use an owner of your own, or none for %q; the manager frees its own owners with Release and Close",
		e.Op, e.Owner, device.UserOwner)
}

// Unwrap returns ErrReservedOwner and ErrInvalidValue.
func (e *OwnerError) Unwrap() []error { return []error{ErrReservedOwner, ErrInvalidValue} }

// AllocOption configures one Alloc.
type AllocOption func(*allocConfig)

type allocConfig struct {
	owner string
}

// WithOwner records the allocation under owner instead of device.UserOwner,
// so FreeOwner(owner) frees it with the others of that owner. owner must not
// be empty nor one the manager reserves (device.ReservedOwner).
func WithOwner(owner string) AllocOption { return func(c *allocConfig) { c.owner = owner } }

// Alloc allocates bytes bytes of device memory for the embedder, on the GPU
// thread, recorded in the ledger as label under the owner (WithOwner;
// device.UserOwner by default). The budget (Budget) is checked before the
// driver is called: an allocation that would pass it is refused with an
// *gpuworker.OutOfMemoryError whose OverBudget is true, and nothing reaches
// the device. The allocation is usable from forward steps (the Device checks
// its ranges against the ledger), lives until Free, FreeOwner, Release or
// Close, and a cancelled ctx once the request has started does not undo it.
//
// Errors: ErrInvalidValue for bytes ≤ 0, an empty label or owner, or a nil
// option (nothing allocated); an *OwnerError (ErrReservedOwner) for a
// reserved owner; ErrOutOfMemory (*gpuworker.OutOfMemoryError) past the
// budget or the device; ErrClosed, ErrReentrant, the context's error.
func (m *Manager) Alloc(ctx context.Context, label string, bytes int64, opts ...AllocOption) (device.Allocation, error) {
	c := allocConfig{owner: device.UserOwner}
	for i, o := range opts {
		if o == nil {
			return device.Allocation{}, fmt.Errorf("alloc %s: %w: option %d is nil", label, ErrInvalidValue, i+1)
		}
		o(&c)
	}
	switch {
	case c.owner == "":
		return device.Allocation{}, fmt.Errorf("alloc %s: %w: empty owner; leave WithOwner out for %q", label, ErrInvalidValue, device.UserOwner)
	case device.ReservedOwner(c.owner):
		return device.Allocation{}, &OwnerError{Op: "alloc", Owner: c.owner}
	case label == "":
		return device.Allocation{}, fmt.Errorf("alloc of %d B for %q: %w: empty label; name what the bytes hold", bytes, c.owner, ErrInvalidValue)
	case bytes <= 0:
		return device.Allocation{}, fmt.Errorf("alloc %s (%d B) for %q: %w: size must be > 0", label, bytes, c.owner, ErrInvalidValue)
	}
	ptr, err := m.worker.Alloc(ctx, c.owner, label, bytes)
	if err != nil {
		return device.Allocation{}, err
	}
	return device.Allocation{Ptr: ptr, Bytes: bytes, Label: label, Owner: c.owner}, nil
}

// Free frees an allocation Alloc returned. Errors: ErrNotAllocated (freed
// already, or never allocated: the backend is not called),
// gpuworker.ErrNotOwner (a.Owner does not hold a.Ptr), an *OwnerError for a
// reserved owner, ErrClosed, ErrReentrant, the context's error (the free may
// then have run: the ledger says), and the backend's (the allocation then
// stays in the ledger, and Release or Close tries again).
func (m *Manager) Free(ctx context.Context, a device.Allocation) error {
	if device.ReservedOwner(a.Owner) {
		return &OwnerError{Op: "free", Owner: a.Owner}
	}
	if err := m.worker.Free(ctx, a.Owner, a.Ptr); err != nil {
		return fmt.Errorf("free %s (%d B, owner %q): %w", a.Label, a.Bytes, a.Owner, err)
	}
	return nil
}

// FreeOwner frees every allocation owner holds, newest first, keeping going
// after an error, and reports how many it freed and their bytes (a second
// call frees nothing and reports 0). Errors: ErrInvalidValue for an empty
// owner, an *OwnerError for a reserved one, ErrClosed, ErrReentrant, the
// context's error, and the first of the backend's.
func (m *Manager) FreeOwner(ctx context.Context, owner string) (device.ReleaseReport, error) {
	switch {
	case owner == "":
		return device.ReleaseReport{}, fmt.Errorf("free owner: %w: empty owner", ErrInvalidValue)
	case device.ReservedOwner(owner):
		return device.ReleaseReport{}, &OwnerError{Op: "free owner", Owner: owner}
	}
	start := time.Now()
	n, bytes, err := m.worker.FreeOwner(ctx, owner)
	return device.ReleaseReport{Freed: n, Bytes: bytes, Duration: time.Since(start)}, err
}

// release frees the arena and its slabs through the supervisors, then
// every other owner the ledger holds (releaseOthers): Release's and close's
// work. An error of the other owners is returned when the arena's part had
// none (or ErrNoArena).
func (m *Manager) release(ctx context.Context) (device.ReleaseReport, error) {
	m.kv.Drop() // the block pool goes before the memory behind it
	r, err := m.sup.Release(ctx)
	start := time.Now()
	if oerr := m.releaseOthers(&r); oerr != nil && (err == nil || errors.Is(err, ErrNoArena)) {
		err = oerr
	}
	r.Duration += time.Since(start)
	return r, err
}

// releaseOthers frees what Release frees besides the arena and its slabs:
// every owner in the ledger that the arena's supervisors do not hold (the
// embedder's owners, the weights and the KV cache), each with FreeOwner,
// keeping going after an error. It adds what it freed to r and returns the
// first error.
func (m *Manager) releaseOthers(r *device.ReleaseReport) error {
	ctx := context.Background() // once started, a release runs to its end
	l, err := m.worker.Ledger(ctx)
	if err != nil {
		return err
	}
	var owners []string
	for o := range l.BytesByOwner() {
		if o != device.ArenaOwner && !device.IsSlabOwner(o) {
			owners = append(owners, o)
		}
	}
	sort.Strings(owners)
	var first error
	for _, o := range owners {
		n, bytes, err := m.worker.FreeOwner(ctx, o)
		r.Freed += n
		r.Bytes += bytes
		if err != nil && first == nil {
			first = fmt.Errorf("release owner %q: %w", o, err)
		}
	}
	return first
}
