package main

import (
	"errors"
	"sync"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
)

// fakeDevice is host memory posing as a device: pointer p is byte p−base of
// mem. dropCopies makes CopyDtoD do nothing; onHtoD runs before each CopyHtoD.
// The compute methods are the embedded nil Device's: the workload launches
// nothing.
type fakeDevice struct {
	device.Device
	mem        []byte
	dropCopies bool
	onHtoD     func()
}

const fakeBase = 0x1000

func (d *fakeDevice) span(p device.DevicePtr, n int64) []byte {
	off := int64(p) - fakeBase
	return d.mem[off : off+n]
}

func (d *fakeDevice) Memset(p device.DevicePtr, v byte, n int64) error {
	for i := range d.span(p, n) {
		d.span(p, n)[i] = v
	}
	return nil
}

func (d *fakeDevice) CopyHtoD(dst device.DevicePtr, src []byte) error {
	if d.onHtoD != nil {
		d.onHtoD()
	}
	copy(d.span(dst, int64(len(src))), src)
	return nil
}

func (d *fakeDevice) CopyDtoH(dst []byte, src device.DevicePtr) error {
	copy(dst, d.span(src, int64(len(dst))))
	return nil
}

func (d *fakeDevice) CopyDtoD(dst, src device.DevicePtr, n int64) error {
	if !d.dropCopies {
		copy(d.span(dst, n), d.span(src, n))
	}
	return nil
}

// fakeArena lays token_ids (64 tokens) and hidden_states and residual
// (128 KiB each) out in a fakeDevice, hidden_states seeded with seedByte.
func fakeArena() (*device.Arena, *fakeDevice) {
	sizes := map[arena.BufferID]int64{arena.TokenIDs: 256, arena.HiddenStates: 128 << 10, arena.Residual: 128 << 10}
	a := &device.Arena{Plan: &arena.Plan{}}
	next := int64(0)
	for _, id := range []arena.BufferID{arena.TokenIDs, arena.HiddenStates, arena.Residual} {
		a.Plan.Buffers[id] = arena.Buffer{ID: id, Bytes: sizes[id]}
		a.Ptrs[id] = device.DevicePtr(fakeBase + next)
		next += sizes[id]
	}
	dev := &fakeDevice{mem: make([]byte, next)}
	hs := dev.span(a.Ptr(arena.HiddenStates), sizes[arena.HiddenStates])
	for i := range hs {
		hs[i] = seedByte(int64(i))
	}
	return a, dev
}

func newClientBufs(w *workload) *clientBufs {
	return &clientBufs{
		tokens:       make([]byte, 4*w.tokens),
		tokensBack:   make([]byte, 4*w.tokens),
		residualBack: make([]byte, min(int64(checkWindow), w.hiddenBytes)),
	}
}

func TestStepChecksReadback(t *testing.T) {
	a, dev := fakeArena()
	w, err := newWorkload(a)
	if err != nil {
		t.Fatal(err)
	}
	b := newClientBufs(w)
	for s := range int64(5) {
		if err := w.step(s, b)(a, dev); err != nil {
			t.Fatalf("step %d on a working device: %v", s, err)
		}
	}
	dev.dropCopies = true
	err = w.step(5, b)(a, dev)
	var ce *checkError
	if !errors.As(err, &ce) {
		t.Fatalf("a device that drops copies: got %v, want a *checkError", err)
	}
	if w.maxAtOnce.Load() != 1 {
		t.Errorf("max at once %d after sequential steps, want 1", w.maxAtOnce.Load())
	}
}

// TestStepCountsOverlap: two steps running at once are counted as two. Each
// runs on its own fake device; both wait inside their step for the other.
func TestStepCountsOverlap(t *testing.T) {
	a, _ := fakeArena()
	w, err := newWorkload(a)
	if err != nil {
		t.Fatal(err)
	}
	var inside, wg sync.WaitGroup
	inside.Add(2)
	for s := range int64(2) {
		a, dev := fakeArena()
		dev.onHtoD = func() { inside.Done(); inside.Wait() }
		b := newClientBufs(w)
		wg.Go(func() {
			if err := w.step(s, b)(a, dev); err != nil {
				t.Errorf("step %d: %v", s, err)
			}
		})
	}
	wg.Wait()
	if got := w.maxAtOnce.Load(); got != 2 {
		t.Errorf("max at once %d with two overlapping steps, want 2", got)
	}
}
