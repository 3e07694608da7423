//go:build cuda

package gpuworker

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena/device"
)

// These tests need a machine with an NVIDIA GPU and its driver: the test
// binary links libcuda.so.1, and gorgonia.org/cu's init() exits the process
// when cuInit fails. Build here, run there:
//
//	eval "$(scripts/cuda-sdk.sh)"
//	go test -c -tags cuda -o gpuworker-cuda.test ./gpuworker/
//	./gpuworker-cuda.test -test.run CUDA -test.v      # on the GPU machine

// onLockedThread runs fn on a new goroutine locked to its own OS thread, as
// the GPU actor does, and waits for it. The goroutine exits still locked, so
// the thread (and whatever context is current on it) dies with it.
func onLockedThread(t *testing.T, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		fn()
	}()
	<-done
}

func TestCUDABackendRoundTrip(t *testing.T) {
	onLockedThread(t, func() {
		b, err := newCUDABackend(0)
		if err != nil {
			t.Errorf("newCUDABackend(0): %v", err)
			return
		}
		defer func() {
			if err := b.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if _, err := b.Alloc(1); !errors.Is(err, ErrClosed) {
				t.Errorf("Alloc after Close: got %v, want ErrClosed", err)
			}
			if err := b.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
		}()

		info := b.Info()
		t.Logf("info: %+v", info)
		if info.Backend != KindCUDA || info.Name == "" || info.TotalBytes <= 0 || info.ComputeMajor <= 0 {
			t.Errorf("Info() = %+v: want backend cuda, a name, memory and a compute capability", info)
		}
		free0, total, err := b.MemInfo()
		if err != nil || free0 <= 0 || total <= 0 || free0 > total {
			t.Errorf("MemInfo() = %d, %d, %v", free0, total, err)
			return
		}
		t.Logf("meminfo: free %d of %d B", free0, total)

		const n = 4<<20 + 3 // not a round size
		a, err := b.Alloc(n)
		if err != nil || a == 0 {
			t.Errorf("Alloc(%d) = %#x, %v", n, uint64(a), err)
			return
		}
		c, err := b.Alloc(n)
		if err != nil || c == 0 {
			t.Errorf("Alloc(%d) = %#x, %v", n, uint64(c), err)
			return
		}

		if err := b.Memset(a, 0xAB, n); err != nil {
			t.Errorf("Memset: %v", err)
		}
		got := make([]byte, n)
		if err := b.CopyDtoH(got, a); err != nil {
			t.Errorf("CopyDtoH: %v", err)
		}
		if want := bytes.Repeat([]byte{0xAB}, n); !bytes.Equal(got, want) {
			t.Errorf("after Memset 0xAB: bytes differ")
		}

		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i*7 + i>>11)
		}
		if err := b.CopyHtoD(a, src); err != nil {
			t.Errorf("CopyHtoD: %v", err)
		}
		if err := b.CopyDtoD(c, a, n); err != nil {
			t.Errorf("CopyDtoD: %v", err)
		}
		clear(got)
		if err := b.CopyDtoH(got, c); err != nil {
			t.Errorf("CopyDtoH: %v", err)
		}
		if !bytes.Equal(got, src) {
			t.Errorf("host→device→device→host: bytes differ")
		}
		// An offset inside an allocation is a valid pointer.
		tail := make([]byte, 16)
		if err := b.CopyDtoH(tail, c+n-16); err != nil || !bytes.Equal(tail, src[n-16:]) {
			t.Errorf("CopyDtoH of the last 16 bytes: %v, %x want %x", err, tail, src[n-16:])
		}

		// Zero sizes are no-ops; negative sizes and NULL never reach the driver.
		for name, err := range map[string]error{
			"Memset 0 B":   b.Memset(a, 1, 0),
			"CopyHtoD 0 B": b.CopyHtoD(a, nil),
			"CopyDtoH 0 B": b.CopyDtoH(nil, a),
			"CopyDtoD 0 B": b.CopyDtoD(c, a, 0),
		} {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		for name, err := range map[string]error{
			"Memset −1 B":       b.Memset(a, 1, -1),
			"Memset NULL":       b.Memset(0, 1, 1),
			"CopyDtoD −1 B":     b.CopyDtoD(c, a, -1),
			"CopyDtoD NULL dst": b.CopyDtoD(0, a, 1),
			"CopyHtoD NULL":     b.CopyHtoD(0, []byte{1}),
		} {
			if !errors.Is(err, ErrInvalidValue) {
				t.Errorf("%s: got %v, want ErrInvalidValue", name, err)
			}
		}
		for _, size := range []int64{0, -1} {
			if _, err := b.Alloc(size); !errors.Is(err, ErrInvalidValue) {
				t.Errorf("Alloc(%d): got %v, want ErrInvalidValue", size, err)
			}
		}

		// More than the device has: the driver's out-of-memory, translated.
		_, err = b.Alloc(2 * total)
		if !errors.Is(err, ErrOutOfMemory) {
			t.Errorf("Alloc(2×total): got %v, want ErrOutOfMemory", err)
		}
		t.Logf("Alloc(2×total): %v", err)

		for _, p := range []device.DevicePtr{a, c} {
			if err := b.Free(p); err != nil {
				t.Errorf("Free(%#x): %v", uint64(p), err)
			}
		}
		err = b.Free(a)
		if !errors.Is(err, ErrNotAllocated) {
			t.Errorf("double Free: got %v, want ErrNotAllocated", err)
		}
		t.Logf("double Free: %v", err)
		if err := b.Free(0); !errors.Is(err, ErrNotAllocated) {
			t.Errorf("Free(NULL): got %v, want ErrNotAllocated", err)
		}

		free1, _, err := b.MemInfo()
		if err != nil {
			t.Errorf("MemInfo: %v", err)
		}
		// The driver frees whole pages back to its pool; allow a little slack.
		if free1 < free0-(4<<20) {
			t.Errorf("free memory after freeing everything: %d B, before: %d B", free1, free0)
		}
	})
}

func TestCUDANoSuchDevice(t *testing.T) {
	onLockedThread(t, func() {
		n, err := cudaDeviceCount()
		if err != nil || n < 1 {
			t.Errorf("cudaDeviceCount() = %d, %v", n, err)
			return
		}
		for _, ordinal := range []int{-1, n, n + 100} {
			b, err := newCUDABackend(ordinal)
			if !errors.Is(err, ErrNoDevice) {
				t.Errorf("newCUDABackend(%d): got %v, want ErrNoDevice", ordinal, err)
			}
			if b != nil {
				t.Errorf("newCUDABackend(%d) returned a backend with the error", ordinal)
			}
		}
	})
}

// TestCUDAOffThread shows what a call from a thread without the context
// gives: an ErrDriver that says so, not a crash.
func TestCUDAOffThread(t *testing.T) {
	var b Backend
	onLockedThread(t, func() {
		var err error
		if b, err = newCUDABackend(0); err != nil {
			t.Errorf("newCUDABackend(0): %v", err)
		}
	})
	if b == nil {
		return
	}
	onLockedThread(t, func() {
		_, err := b.Alloc(1 << 20)
		if !errors.Is(err, ErrDriver) || !strings.Contains(err.Error(), "no CUDA context") {
			t.Errorf("Alloc off the backend's thread: got %v, want ErrDriver naming the missing context", err)
		}
		t.Logf("Alloc off the backend's thread: %v", err)
	})
	// The thread that opened it is gone; Close from a fresh locked thread
	// still releases the primary context (release names the device, not the
	// thread).
	onLockedThread(t, func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}
