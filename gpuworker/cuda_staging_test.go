//go:build cuda

package gpuworker

import (
	"bytes"
	"errors"
	"testing"
)

// Page-locked staging: an asynchronous copy lands once its buffer's mark is
// waited for; a source outside a staging buffer and a buffer that is not one
// are refused; Close frees the buffers still held.
func TestCUDAStaging(t *testing.T) {
	onLockedThread(t, func() {
		be, err := newCUDABackend(0)
		if err != nil {
			t.Errorf("newCUDABackend(0): %v", err)
			return
		}
		b := be.(*cudaBackend)
		defer func() {
			if err := b.Close(); err != nil {
				t.Errorf("Close with a staging buffer held: %v", err)
			}
			if len(b.staging) != 0 {
				t.Errorf("Close left %d staging buffers", len(b.staging))
			}
		}()
		const n = 3 << 20
		buf, err := b.AllocStaging(n)
		if err != nil {
			t.Errorf("AllocStaging: %v", err)
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
		if err := b.FreeStaging(buf[:16]); !errors.Is(err, ErrNotAllocated) {
			t.Errorf("free of part of a staging buffer: %v, want ErrNotAllocated", err)
		}
		if _, err := b.AllocStaging(0); !errors.Is(err, ErrInvalidValue) {
			t.Errorf("AllocStaging(0): %v, want ErrInvalidValue", err)
		}
		if _, err := b.AllocStaging(1 << 20); err != nil { // left for Close
			t.Errorf("AllocStaging: %v", err)
		}
	})
}
