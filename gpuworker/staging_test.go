package gpuworker_test

import (
	"context"
	"errors"
	"testing"
	"unsafe"

	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// lazyUploader is a simulated device whose staging copies happen late: a
// copy is only queued when it is started, and done — reading its source
// then — when a WaitStaging or FreeStaging reaches its mark, in the order
// the copies were started, as on a CUDA stream. A loader that refilled a
// buffer before waiting for its copies would upload the new bytes, and the
// checksums would show it.
type lazyUploader struct {
	*gpuworker.HostSim
	queue []queuedCopy  // started, not done
	marks map[*byte]int // buffer → the queue length its mark covers
	live  map[*byte]int // buffer → its size, while allocated
	held  int           // most buffers allocated at once
	done  int           // copies done
}

type queuedCopy struct {
	dst device.DevicePtr
	src []byte
}

func newLazyUploader(t *testing.T) *lazyUploader {
	t.Helper()
	sim, err := gpuworker.NewHostSim(gpuworker.HostSimConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return &lazyUploader{HostSim: sim, marks: map[*byte]int{}, live: map[*byte]int{}}
}

func (l *lazyUploader) AllocStaging(bytes int64) ([]byte, error) {
	buf := make([]byte, bytes)
	l.live[&buf[0]] = len(buf)
	l.held = max(l.held, len(l.live))
	return buf, nil
}

func (l *lazyUploader) FreeStaging(buf []byte) error {
	if err := l.WaitStaging(buf); err != nil {
		return err
	}
	delete(l.live, &buf[0])
	delete(l.marks, &buf[0])
	return nil
}

func (l *lazyUploader) inside(src []byte) bool {
	p := uintptr(unsafe.Pointer(&src[0]))
	for b, n := range l.live {
		if base := uintptr(unsafe.Pointer(b)); p >= base && p+uintptr(len(src)) <= base+uintptr(n) {
			return true
		}
	}
	return false
}

func (l *lazyUploader) CopyHtoDAsync(dst device.DevicePtr, src []byte) error {
	if !l.inside(src) {
		return gpuworker.ErrInvalidValue
	}
	l.queue = append(l.queue, queuedCopy{dst, src})
	return nil
}

func (l *lazyUploader) MarkStaging(buf []byte) error {
	l.marks[&buf[0]] = l.done + len(l.queue)
	return nil
}

func (l *lazyUploader) WaitStaging(buf []byte) error {
	for l.done < l.marks[&buf[0]] {
		c := l.queue[0]
		l.queue = l.queue[1:]
		l.done++
		if err := l.HostSim.CopyHtoD(c.dst, c.src); err != nil {
			return err
		}
	}
	return nil
}

// Through a backend with asynchronous staging copies, every tensor arrives
// intact (no buffer refilled before its copies were done), with readers
// filling chunks out of order, and every staging buffer is freed.
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
		if len(up.live) != 0 || len(up.queue) != 0 || up.held != readers+2 {
			t.Fatalf("%d readers: %d staging buffers left, %d copies not done, %d held at once; want 0, 0, %d", readers, len(up.live), len(up.queue), up.held, readers+2)
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
	}
}

// A load cancelled between chunks waits for the copies it started, frees
// its staging buffers and the weights.
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
	if len(up.live) != 0 || len(up.queue) != 0 || up.BytesInUse() != 0 {
		t.Fatalf("after the cancelled load: %d staging buffers, %d copies pending, %d B on the device; want none", len(up.live), len(up.queue), up.BytesInUse())
	}
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
