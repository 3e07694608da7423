package gpuworker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"unsafe"

	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// lazyUploader is a simulated device whose staging copies happen late: a
// copy is only queued when it is started, and done — reading its source
// then — when a WaitStaging or UnregisterStaging reaches its mark, in the
// order the copies were started, as on a CUDA stream. A loader that refilled
// a buffer before waiting for its copies, or unlocked one before they were
// done, would upload the wrong bytes, and the checksums would show it. It
// checks what cuMemHostRegister needs: whole buffers, no two sharing a
// page, every call on one thread.
type lazyUploader struct {
	*gpuworker.HostSim
	queue   []queuedCopy  // started, not done
	marks   map[*byte]int // buffer → the queue length its mark covers
	live    map[*byte]int // buffer → its size, while registered
	held    int           // most buffers registered at once
	threads map[int]bool  // the threads the staging calls ran on
	// overlapped counts unregistrations made while copies from other
	// buffers were still queued.
	overlapped int
	// failRegister fails the registration of that buffer (1: the first);
	// failCopy fails the first copy that does not start a buffer;
	// failUnregister fails every unregistration.
	failRegister   int
	registered     int
	failCopy       bool
	failUnregister bool
}

type queuedCopy struct {
	dst device.DevicePtr
	src []byte
}

var errInjected = errors.New("injected staging failure")

func newLazyUploader(t *testing.T) *lazyUploader {
	t.Helper()
	sim, err := gpuworker.NewHostSim(gpuworker.HostSimConfig{RecordThreads: true})
	if err != nil {
		t.Fatal(err)
	}
	return &lazyUploader{HostSim: sim, marks: map[*byte]int{}, live: map[*byte]int{}, threads: map[int]bool{}}
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

func (l *lazyUploader) RegisterStaging(buf []byte) error {
	l.threads[gpuworker.ThreadID()] = true
	page := uintptr(os.Getpagesize())
	if len(buf) == 0 || addr(buf)%page != 0 {
		return fmt.Errorf("register %d B at %#x: %w: not a page-aligned buffer", len(buf), addr(buf), gpuworker.ErrInvalidValue)
	}
	for b, n := range l.live {
		// Pages are locked whole: a buffer must not share one with another.
		lo, hi := uintptr(unsafe.Pointer(b))/page, (uintptr(unsafe.Pointer(b))+uintptr(n)-1)/page
		if addr(buf)/page <= hi && lo <= (addr(buf)+uintptr(len(buf))-1)/page {
			return fmt.Errorf("register %d B at %#x: %w: shares a page with a registered buffer", len(buf), addr(buf), gpuworker.ErrInvalidValue)
		}
	}
	if l.registered++; l.registered == l.failRegister {
		return errInjected
	}
	l.live[&buf[0]] = len(buf)
	l.held = max(l.held, len(l.live))
	return nil
}

func (l *lazyUploader) registeredWhole(buf []byte) error {
	if len(buf) == 0 || l.live[&buf[0]] != len(buf) {
		return gpuworker.ErrNotAllocated
	}
	return nil
}

func (l *lazyUploader) UnregisterStaging(buf []byte) error {
	l.threads[gpuworker.ThreadID()] = true
	if err := l.registeredWhole(buf); err != nil {
		return err
	}
	err := l.WaitStaging(buf)
	if len(l.queue) > 0 {
		l.overlapped++
	}
	delete(l.live, &buf[0])
	delete(l.marks, &buf[0])
	if l.failUnregister {
		return errors.Join(err, errInjected)
	}
	return err
}

func (l *lazyUploader) inside(src []byte) (start bool, ok bool) {
	p := addr(src)
	for b, n := range l.live {
		if base := uintptr(unsafe.Pointer(b)); p >= base && p+uintptr(len(src)) <= base+uintptr(n) {
			return p == base, true
		}
	}
	return false, false
}

func (l *lazyUploader) CopyHtoDAsync(dst device.DevicePtr, src []byte) error {
	l.threads[gpuworker.ThreadID()] = true
	start, ok := l.inside(src)
	if !ok {
		return gpuworker.ErrInvalidValue
	}
	if l.failCopy && !start {
		l.failCopy = false
		return errInjected
	}
	l.queue = append(l.queue, queuedCopy{dst, src})
	return nil
}

func (l *lazyUploader) MarkStaging(buf []byte) error {
	l.threads[gpuworker.ThreadID()] = true
	if err := l.registeredWhole(buf); err != nil {
		return err
	}
	l.marks[&buf[0]] = len(l.queue)
	return nil
}

// WaitStaging does the queued copies up to buf's mark. The marks count
// copies from the queue's head, which each done copy moves.
func (l *lazyUploader) WaitStaging(buf []byte) error {
	l.threads[gpuworker.ThreadID()] = true
	if err := l.registeredWhole(buf); err != nil {
		return err
	}
	n := l.marks[&buf[0]]
	for range n {
		c := l.queue[0]
		l.queue = l.queue[1:]
		if err := l.HostSim.CopyHtoD(c.dst, c.src); err != nil {
			return err
		}
	}
	for b, m := range l.marks {
		l.marks[b] = max(m-n, 0)
	}
	return nil
}

// checkReleased fails the test unless every staging buffer was unlocked,
// every copy started was done, the device holds no byte, and every staging
// call ran on the GPU thread, one thread.
func (l *lazyUploader) checkReleased(t *testing.T, what string) {
	t.Helper()
	if len(l.live) != 0 || len(l.queue) != 0 || l.BytesInUse() != 0 {
		t.Fatalf("%s: %d staging buffers still registered, %d copies not done, %d B on the device; want none", what, len(l.live), len(l.queue), l.BytesInUse())
	}
	sim := l.Threads()
	for id := range l.threads {
		if len(l.threads) != 1 || sim[id] == 0 {
			t.Fatalf("%s: staging calls ran on threads %v, the device's calls on %v; want one, the GPU thread", what, l.threads, sim)
		}
	}
}

// Through a backend with asynchronous staging copies, every tensor arrives
// intact (no buffer refilled or unlocked before its copies were done),
// with readers filling chunks out of order; every staging buffer is
// registered once, on the GPU thread, and unregistered once its last copy
// is done: all but the last while the copies after it are still queued.
func TestLoadWeightsStagedCopies(t *testing.T) {
	ctx := context.Background()
	ck, man := openWeights(t, checkpoint.WriteOptions{Seed: 5})
	for _, readers := range []int{1, 3} {
		up := newLazyUploader(t)
		w := startWith(t, func() (gpuworker.Backend, error) { return up, nil })
		wts, err := w.LoadWeights(ctx, ck, gpuworker.LoadOptions{ChunkBytes: 700, Readers: readers})
		if err != nil {
			t.Fatal(err)
		}
		if len(up.live) != 0 || len(up.queue) != 0 || up.held != readers+2 || up.registered != readers+2 || up.overlapped != readers+1 {
			t.Fatalf("%d readers: %d staging buffers left, %d copies not done, %d held at once, %d registrations, %d unlocked before the last copy; want 0, 0, %d, %d, %d",
				readers, len(up.live), len(up.queue), up.held, up.registered, up.overlapped, readers+2, readers+2, readers+1)
		}
		for _, tt := range wts.Tensors {
			if tt.Bytes == 0 {
				continue
			}
			data, err := w.CopyDtoH(ctx, tt.Ptr, tt.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if h := checkpoint.NewHash(); func() uint32 { h.Write(data); return h.Sum32() }() != man.Checksums[tt.Name] {
				t.Fatalf("%d readers: %s reads back with a different CRC", readers, tt.Name)
			}
		}
		if _, _, err := w.FreeOwner(ctx, device.WeightsOwner); err != nil {
			t.Fatal(err)
		}
		up.checkReleased(t, fmt.Sprintf("%d readers", readers))
	}
}

// A load cancelled between chunks waits for the copies it started, unlocks
// its staging buffers and frees the weights.
func TestLoadWeightsStagedCancel(t *testing.T) {
	ck, _ := openWeights(t, checkpoint.WriteOptions{Seed: 6})
	up := newLazyUploader(t)
	w := startWith(t, func() (gpuworker.Backend, error) { return up, nil })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	chunks := 0
	_, err := w.LoadWeights(ctx, ck, gpuworker.LoadOptions{ChunkBytes: 512, Readers: 2, Progress: func(device.LoadProgress) {
		if chunks++; chunks == 2 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled load: %v, want context.Canceled", err)
	}
	up.checkReleased(t, "after the cancelled load")
}

// A staging buffer the backend cannot lock, or a copy it refuses halfway
// through a chunk, stops the load with the backend's error; the copies
// started before it are waited for, every buffer locked is unlocked and the
// weights are freed.
func TestLoadWeightsStagedFailures(t *testing.T) {
	ck, _ := openWeights(t, checkpoint.WriteOptions{Seed: 7})
	for _, tc := range []struct {
		name string
		set  func(*lazyUploader)
	}{
		{"first registration", func(l *lazyUploader) { l.failRegister = 1 }},
		{"fourth registration", func(l *lazyUploader) { l.failRegister = 4 }},
		{"copy in mid-chunk", func(l *lazyUploader) { l.failCopy = true }},
	} {
		up := newLazyUploader(t)
		tc.set(up)
		w := startWith(t, func() (gpuworker.Backend, error) { return up, nil })
		_, err := w.LoadWeights(context.Background(), ck, gpuworker.LoadOptions{ChunkBytes: 700, Readers: 3})
		if !errors.Is(err, errInjected) {
			t.Fatalf("%s: %v, want the injected failure", tc.name, err)
		}
		up.checkReleased(t, tc.name)
	}
}

// A staging buffer the backend fails to unlock is reported, with the
// memory left mapped (the driver may still hold it); the weights loaded
// are freed all the same.
func TestLoadWeightsStagedUnregisterFails(t *testing.T) {
	ck, _ := openWeights(t, checkpoint.WriteOptions{Seed: 8})
	up := newLazyUploader(t)
	up.failUnregister = true
	w := startWith(t, func() (gpuworker.Backend, error) { return up, nil })
	_, err := w.LoadWeights(context.Background(), ck, gpuworker.LoadOptions{ChunkBytes: 4096, Readers: 1})
	if !errors.Is(err, errInjected) {
		t.Fatalf("load whose staging cannot be unlocked: %v, want the injected failure", err)
	}
	up.checkReleased(t, "after the failed unlock")
}

// Readers out of range are refused before anything is allocated.
func TestLoadOptionsReaders(t *testing.T) {
	for _, n := range []int{-1, gpuworker.MaxLoadReaders + 1} {
		if err := (gpuworker.LoadOptions{Readers: n}).Validate(); !errors.Is(err, gpuworker.ErrInvalidValue) {
			t.Fatalf("%d readers: %v, want ErrInvalidValue", n, err)
		}
	}
	if err := (gpuworker.LoadOptions{Readers: gpuworker.MaxLoadReaders}).Validate(); err != nil {
		t.Fatal(err)
	}
}
