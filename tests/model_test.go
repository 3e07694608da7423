package tests

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/gpuarena/gpuarena/actors"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// The model-based test: several goroutines send random sequences of
// requests to one GPU worker and its supervisors (the manager's
// composition). Client 0 drives the arena (build, forward steps in and out of
// range, carves, release); every other client allocates, frees (also twice,
// and as the wrong owner), memsets and copies (in and out of range) for its
// own owner. After every request the client checks the reply against its
// reference model (model_ref_test.go) — the error it must get, the bytes it
// must read back — and the ledger: its owner's entries equal the model's,
// and the ledger's total equals the device's bytes in use.

const (
	modelCapacity = 1 << 30 // the simulated device: 1 GiB
	maxAlloc      = 64 << 10
)

// TestModel runs the model with fixed seeds, bounded to stay fast under -race.
func TestModel(t *testing.T) {
	for _, seed := range []int64{1, 2, 3} {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { runModel(t, seed, 6, 150) })
	}
}

// FuzzModel drives the model with random seeds:
//
//	go test ./tests -run '^$' -fuzz FuzzModel -fuzztime 60s
func FuzzModel(f *testing.F) {
	f.Add(int64(1))
	f.Fuzz(func(t *testing.T, seed int64) { runModel(t, seed, 4, 60) })
}

func runModel(t *testing.T, seed int64, clients, steps int) {
	sim := newSim(t, gpuworker.HostSimConfig{TotalBytes: modelCapacity})
	w, s := supRig(t, sim)
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	wg.Go(func() { errs <- arenaClient(w, s, rand.New(rand.NewPCG(uint64(seed), 0)), steps) })
	for i := 1; i < clients; i++ {
		wg.Go(func() {
			errs <- allocClient(w, newOwnerModel(fmt.Sprint("c", i)), rand.New(rand.NewPCG(uint64(seed), uint64(i))), steps)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		t.Fatalf("seed %d: the model and the worker disagree", seed)
	}
	// Every client's allocations are its own to free; with them freed and
	// the arena released, nothing is left.
	for i := 1; i < clients; i++ {
		if _, _, err := w.FreeOwner(context.Background(), fmt.Sprint("c", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l := agrees(t, w, sim); l.Counters.CurrentBytes != 0 {
		t.Fatalf("the ledger holds %d B at the end", l.Counters.CurrentBytes)
	}
}

// checkShared is the check on the whole ledger any client can make: its
// total equals the device's bytes in use, in the same snapshot.
func checkShared(l device.Ledger) error {
	if l.Counters.CurrentBytes != l.BackendBytesInUse {
		return fmt.Errorf("the ledger holds %d B, the device %d B", l.Counters.CurrentBytes, l.BackendBytesInUse)
	}
	return nil
}

// allocClient runs steps random requests for its owner, checking each.
func allocClient(w *gpuworker.Worker, m *ownerModel, rng *rand.Rand, steps int) error {
	ctx := context.Background()
	for step := range steps {
		op, err := allocStep(ctx, w, m, rng)
		if err == nil {
			var l device.Ledger
			if l, err = w.Ledger(ctx); err == nil {
				if err = checkShared(l); err == nil {
					err = m.checkOwned(l)
				}
			}
		}
		if err != nil {
			return fmt.Errorf("%s, step %d (%s): %w", m.owner, step, op, err)
		}
	}
	return nil
}

// pick returns a random element of ps, and false when ps is empty.
func pick(rng *rand.Rand, ps []device.DevicePtr) (device.DevicePtr, bool) {
	if len(ps) == 0 {
		return 0, false
	}
	return ps[rng.IntN(len(ps))], true
}

// allocStep makes one random request and checks its reply against the model.
func allocStep(ctx context.Context, w *gpuworker.Worker, m *ownerModel, rng *rand.Rand) (string, error) {
	p, has := pick(rng, m.ptrs())
	switch op := rng.IntN(16); {
	case op < 4 || !has:
		n := 1 + rng.Int64N(maxAlloc)
		label := fmt.Sprint("a", rng.IntN(1000))
		ptr, err := w.Alloc(ctx, m.owner, label, n)
		if err := wantErr("alloc", err); err != nil {
			return "alloc", err
		}
		m.live[ptr] = &shadow{label: label, data: make([]byte, n)}
		return "alloc", nil
	case op == 4:
		_, err := w.Alloc(ctx, m.owner, "bad", -rng.Int64N(3))
		return "alloc ≤ 0 B", wantErr("alloc", err, gpuworker.ErrInvalidValue)
	case op == 5:
		_, err := w.Alloc(ctx, m.owner, "huge", 2*modelCapacity)
		return "alloc past the device", wantErr("alloc", err, gpuworker.ErrOutOfMemory)
	case op == 6:
		items := []messages.AllocItem{{Label: "b0", Bytes: 1 + rng.Int64N(maxAlloc)}, {Label: "b1", Bytes: 1 + rng.Int64N(maxAlloc)}}
		bad := rng.IntN(2) == 0
		if bad {
			items = append(items, messages.AllocItem{Label: "b2", Bytes: 0})
		}
		ptrs, _, err := w.AllocBatch(ctx, m.owner, items, nil)
		if bad {
			return "batch with a bad item", wantErr("batch", err, gpuworker.ErrInvalidValue)
		}
		if err := wantErr("batch", err); err != nil {
			return "batch", err
		}
		for i, ptr := range ptrs {
			m.live[ptr] = &shadow{label: items[i].Label, data: make([]byte, items[i].Bytes)}
		}
		return "batch", nil
	case op == 7:
		delete(m.live, p)
		m.freed = append(m.freed, p)
		return "free", wantErr("free", w.Free(ctx, m.owner, p))
	case op == 8:
		// A double free: the address may since belong to another owner.
		q, ok := pick(rng, m.stale())
		if !ok {
			return "double free (none)", nil
		}
		return "double free", wantErr("double free", w.Free(ctx, m.owner, q), gpuworker.ErrNotAllocated, gpuworker.ErrNotOwner)
	case op == 9:
		return "free by another owner", wantErr("free", w.Free(ctx, "intruder", p), gpuworker.ErrNotOwner)
	case op == 10:
		sh := m.live[p]
		off := rng.Int64N(int64(len(sh.data)))
		n := rng.Int64N(int64(len(sh.data)) - off + 1)
		v := byte(rng.IntN(256))
		if err := wantErr("memset", w.Memset(ctx, p+device.DevicePtr(off), v, n)); err != nil {
			return "memset", err
		}
		for i := off; i < off+n; i++ {
			sh.data[i] = v
		}
		return "memset", nil
	case op == 11:
		sh := m.live[p]
		off := rng.Int64N(int64(len(sh.data)))
		err := w.Memset(ctx, p+device.DevicePtr(off), 1, int64(len(sh.data))-off+1+rng.Int64N(64))
		return "memset past the end", wantErr("memset", err, gpuworker.ErrOutOfRange)
	case op == 12:
		sh := m.live[p]
		off := rng.Int64N(int64(len(sh.data)))
		src := make([]byte, rng.Int64N(int64(len(sh.data))-off+1))
		for i := range src {
			src[i] = byte(rng.IntN(256))
		}
		if err := wantErr("copy host→device", w.CopyHtoD(ctx, p+device.DevicePtr(off), src)); err != nil {
			return "copy host→device", err
		}
		copy(sh.data[off:], src)
		return "copy host→device", nil
	case op == 13:
		sh := m.live[p]
		err := w.CopyHtoD(ctx, p, make([]byte, len(sh.data)+1))
		return "copy host→device past the end", wantErr("copy", err, gpuworker.ErrOutOfRange)
	case op == 14:
		sh := m.live[p]
		got, err := w.CopyDtoH(ctx, p, int64(len(sh.data)))
		if err := wantErr("copy device→host", err); err != nil {
			return "copy device→host", err
		}
		if i := firstDiffAt(got, sh.data); i >= 0 {
			return "copy device→host", fmt.Errorf("%s reads back different from the model at byte %d", sh.label, i)
		}
		return "copy device→host", nil
	default:
		q, _ := pick(rng, m.ptrs())
		src, dst := m.live[p], m.live[q]
		n := rng.Int64N(int64(min(len(src.data), len(dst.data))) + 1)
		if q == p && n > 0 {
			// A copy onto itself overlaps: refused, nothing changes.
			if err := w.CopyDtoD(ctx, q, p, n); !errors.Is(err, gpuworker.ErrInvalidValue) {
				return "copy device→device", fmt.Errorf("copy of %d B onto itself: %v, want ErrInvalidValue", n, err)
			}
			return "copy device→device", nil
		}
		if err := wantErr("copy device→device", w.CopyDtoD(ctx, q, p, n)); err != nil {
			return "copy device→device", err
		}
		copy(dst.data[:n], src.data[:n])
		if rng.IntN(8) == 0 {
			freed, _, err := w.FreeOwner(ctx, m.owner)
			if err := wantErr("free owner", err); err != nil {
				return "free owner", err
			}
			if freed != len(m.live) {
				return "free owner", fmt.Errorf("freed %d allocations, the model holds %d", freed, len(m.live))
			}
			for ptr := range m.live {
				m.freed = append(m.freed, ptr)
			}
			clear(m.live)
		}
		return "copy device→device", nil
	}
}

// arenaClient runs steps random arena requests, checking each.
func arenaClient(w *gpuworker.Worker, s *actors.Supervisors, rng *rand.Rand, steps int) error {
	ctx := context.Background()
	m := &arenaModel{hidden: make([]byte, smallPlan().Buffers[arena.HiddenStates].Bytes)}
	for step := range steps {
		// Release ends the arena's life: only in the last quarter of the run.
		op, err := arenaStep(ctx, s, m, rng, step >= steps*3/4)
		if err == nil {
			var l device.Ledger
			if l, err = w.Ledger(ctx); err == nil {
				if err = checkShared(l); err == nil {
					err = m.checkLedger(l)
				}
			}
		}
		if err != nil {
			return fmt.Errorf("arena client, step %d (%s): %w", step, op, err)
		}
	}
	return nil
}

// arenaStep makes one random arena request and checks its reply.
func arenaStep(ctx context.Context, s *actors.Supervisors, m *arenaModel, rng *rand.Rand, mayRelease bool) (string, error) {
	switch op := rng.IntN(32); {
	case op < 4:
		layout := []device.Layout{device.LayoutPooled, device.LayoutDiscrete}[rng.IntN(2)]
		a, err := s.BuildArena(ctx, smallPlan(), layout)
		want := m.buildErr()
		if err := wantErr("build", err, want...); err != nil || want != nil {
			return "build", err
		}
		m.state, m.arena, m.layout = builtArena, a, layout
		return "build " + string(layout), nil
	case op < 16:
		off := rng.Int64N(int64(len(m.hidden)))
		data := make([]byte, rng.Int64N(int64(len(m.hidden))-off+1))
		for i := range data {
			data[i] = byte(rng.IntN(256))
		}
		var got []byte
		_, err := s.Forward(ctx, func(a *device.Arena, dev device.Device) error {
			p := a.Ptr(arena.HiddenStates)
			if err := dev.CopyHtoD(p+device.DevicePtr(off), data); err != nil {
				return err
			}
			got = make([]byte, a.Bytes(arena.HiddenStates))
			return dev.CopyDtoH(got, p)
		})
		want := m.forwardErr()
		if err := wantErr("forward", err, want...); err != nil || want != nil {
			return "forward", err
		}
		copy(m.hidden[off:], data)
		return "forward", m.checkHidden(got)
	case op < 18:
		_, err := s.Forward(ctx, func(a *device.Arena, dev device.Device) error {
			return dev.Memset(a.Ptr(arena.HiddenStates)+1, 0, a.Bytes(arena.HiddenStates))
		})
		want := m.forwardErr()
		if want == nil {
			want = []error{gpuworker.ErrOutOfRange}
		}
		return "forward past the buffer", wantErr("forward", err, want...)
	case op < 28:
		n := rng.Int64N(600<<10) - 1024 // some ≤ 0
		name := "w"
		if rng.IntN(10) == 0 {
			name = "nope"
		}
		off, want := m.carve(name, n)
		ptr, got, err := s.CarveSlab(ctx, name, n, 0)
		if err := wantErr("carve", err, want...); err != nil || want != nil {
			return "carve", err
		}
		if got != off || ptr != m.arena.Slabs[0].Ptr+device.DevicePtr(off) {
			return "carve", fmt.Errorf("carve of %d B at offset %d, want %d", n, got, off)
		}
		m.used = off + n
		m.carves = append(m.carves, messages.PoolView{Label: fmt.Sprintf("w carve@%d", off), Offset: off, Bytes: n})
		return "carve", nil
	case op == 28 && mayRelease:
		freed, bytes := m.release()
		r, err := s.Release(ctx)
		if err := wantErr("release", err); err != nil {
			return "release", err
		}
		if r.Freed != freed || r.Bytes != bytes {
			return "release", fmt.Errorf("release freed %d allocations, %d B; want %d, %d B", r.Freed, r.Bytes, freed, bytes)
		}
		if m.state == builtArena {
			m.carves = nil
		}
		m.state = releasedArena
		return "release", nil
	default:
		return "ledger", nil // the check after every step reads it
	}
}
