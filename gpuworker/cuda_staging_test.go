//go:build cuda

package gpuworker

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// Page-locked staging on memory the caller maps: an asynchronous copy lands
// once its buffer's mark is waited for; a source outside a registered
// buffer, an empty or overlapping registration and an unregistration of
// part of a buffer are refused with typed errors; an unregistered buffer
// copies no more; Close unlocks the buffers still registered and leaves
// their memory to the caller.
func TestCUDAStaging(t *testing.T) {
	onLockedThread(t, func() {
		const n = 3 << 20
		set, err := newStagingSet(2, n)
		if err != nil {
			t.Errorf("newStagingSet: %v", err)
			return
		}
		defer func() {
			if err := unmapStaging(set.mem); err != nil {
				t.Errorf("unmap the staging: %v", err)
			}
		}()
		buf, spare := set.bufs[0].mem, set.bufs[1].mem
		touchPages(set.mem, os.Getpagesize())
		be, err := newCUDABackend(0)
		if err != nil {
			t.Errorf("newCUDABackend(0): %v", err)
			return
		}
		b := be.(*cudaBackend)
		defer func() {
			if err := b.Close(); err != nil {
				t.Errorf("Close with a staging buffer registered: %v", err)
			}
			if len(b.staging) != 0 {
				t.Errorf("Close left %d staging buffers registered", len(b.staging))
			}
		}()
		if err := b.RegisterStaging(buf); err != nil {
			t.Errorf("RegisterStaging: %v", err)
			return
		}
		for i := range buf {
			buf[i] = byte(i * 7)
		}
		dst, err := b.Alloc(n)
		if err != nil {
			t.Errorf("Alloc: %v", err)
			return
		}
		defer b.Free(dst)
		if err := b.CopyHtoDAsync(dst, buf[1<<20:]); err != nil {
			t.Errorf("CopyHtoDAsync: %v", err)
		}
		if err := b.CopyHtoDAsync(dst+2<<20, buf[:1<<20]); err != nil {
			t.Errorf("CopyHtoDAsync: %v", err)
		}
		if err := b.MarkStaging(buf); err != nil {
			t.Errorf("MarkStaging: %v", err)
		}
		if err := b.WaitStaging(buf); err != nil {
			t.Errorf("WaitStaging: %v", err)
		}
		got := make([]byte, n)
		if err := b.CopyDtoH(got, dst); err != nil {
			t.Errorf("CopyDtoH: %v", err)
		}
		want := append(append([]byte{}, buf[1<<20:]...), buf[:1<<20]...)
		if !bytes.Equal(got, want) {
			t.Error("the device does not hold what the staging copies sent")
		}
		if err := b.CopyHtoDAsync(dst, make([]byte, 16)); !errors.Is(err, ErrInvalidValue) {
			t.Errorf("async copy from Go memory: %v, want ErrInvalidValue", err)
		}
		if err := b.CopyHtoDAsync(dst, spare[:16]); !errors.Is(err, ErrInvalidValue) {
			t.Errorf("async copy from a buffer not registered: %v, want ErrInvalidValue", err)
		}
		if err := b.UnregisterStaging(buf[:16]); !errors.Is(err, ErrNotAllocated) {
			t.Errorf("unregister part of a staging buffer: %v, want ErrNotAllocated", err)
		}
		if err := b.RegisterStaging(nil); !errors.Is(err, ErrInvalidValue) {
			t.Errorf("RegisterStaging(nil): %v, want ErrInvalidValue", err)
		}
		if err := b.RegisterStaging(buf[1<<20:]); !errors.Is(err, ErrInvalidValue) {
			t.Errorf("RegisterStaging of part of a registered buffer: %v, want ErrInvalidValue", err)
		}
		if err := b.UnregisterStaging(buf); err != nil {
			t.Errorf("UnregisterStaging: %v", err)
		}
		if err := b.UnregisterStaging(buf); !errors.Is(err, ErrNotAllocated) {
			t.Errorf("second UnregisterStaging: %v, want ErrNotAllocated", err)
		}
		if err := b.CopyHtoDAsync(dst, buf[:16]); !errors.Is(err, ErrInvalidValue) {
			t.Errorf("async copy from an unregistered buffer: %v, want ErrInvalidValue", err)
		}
		if err := b.RegisterStaging(spare); err != nil { // left for Close
			t.Errorf("RegisterStaging: %v", err)
		}
	})
}
