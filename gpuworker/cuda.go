//go:build cuda

package gpuworker

import (
	"fmt"
	"runtime"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/gpuarena/gpuarena/device"
)

// This file, cuda_staging.go and cuda_errors.go are the only ones that
// import gorgonia.org/cu.
// They use its package-level functions, never its Ctx type (design.md §1):
// Ctx keeps the last error in one shared field and its Close destroys the
// context from whichever thread calls it.
//
// Importing gorgonia.org/cu has two effects on the whole binary, which is why
// it sits behind the cuda build tag: the binary needs libcuda.so.1 at load
// time, and cu's init() calls cuInit(0) and exits the process (status 1,
// after printing the error to stdout) if that fails, e.g. on a machine with
// the driver library but no GPU.

func init() {
	Register(KindCUDA, func(c BackendConfig) (Backend, error) { return newCUDABackend(c.Ordinal) })
}

// cudaBackend is the Backend for one real CUDA device. It is made by
// newCUDABackend on the GPU actor's locked OS thread, with the device's
// primary context current on that thread, and every method must be called on
// that same thread: the context is current per thread, and a call from
// another thread fails with CUDA_ERROR_INVALID_CONTEXT (ErrDriver) at best.
type cudaBackend struct {
	dev    cu.Device
	ctx    cu.CUContext
	info   DeviceInfo
	closed bool
	// upload is the stream staging copies run on and staging the
	// page-locked buffers by address (cuda_staging.go); both are made by
	// the first RegisterStaging.
	upload  cu.Stream
	staging map[uintptr]*hostRegistration
	// compute is the step stream, modules and events (cuda_compute.go).
	compute cudaCompute
}

var (
	_ Backend      = (*cudaBackend)(nil)
	_ ThreadBinder = (*cudaBackend)(nil)
)

// BindThread makes the device's primary context current on the calling
// thread (cuCtxSetCurrent): the GPU actor calls it on a fresh locked thread
// that takes over after runtime.Goexit ended the one the backend was opened
// on. Errors: the driver's, translated.
func (b *cudaBackend) BindThread() error {
	if err := b.checkOpen("bind thread"); err != nil {
		return err
	}
	if err := cu.SetCurrentContext(b.ctx); err != nil {
		return cudaErr(fmt.Sprintf("cuCtxSetCurrent(device %d primary context) on a new GPU thread", b.info.Ordinal), err)
	}
	b.recordThread()
	return nil
}

// newCUDABackend opens device ordinal: it retains the device's primary
// context (creating it if no one holds it yet) and makes it current on the
// calling OS thread, which must be locked (runtime.LockOSThread) and must be
// the one that makes every later call. An ordinal that does not exist gives
// ErrNoDevice; other driver failures are translated as in cudaErr.
func newCUDABackend(ordinal int) (Backend, error) {
	n, err := cudaDeviceCount()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("cuda device %d: %w: this machine has %d (ordinals 0 to %d)", ordinal, ErrNoDevice, n, n-1)
	}
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return nil, cudaErr(fmt.Sprintf("cuDeviceGet(%d)", ordinal), err)
	}
	info, err := cudaDeviceInfo(dev, ordinal)
	if err != nil {
		return nil, err
	}
	ctx, err := dev.RetainPrimaryCtx()
	if err != nil {
		return nil, cudaErr(fmt.Sprintf("cuDevicePrimaryCtxRetain(device %d)", ordinal), err)
	}
	if err := cu.SetCurrentContext(ctx); err != nil {
		_ = dev.ReleasePrimaryCtx() // the first error is the one to report
		return nil, cudaErr(fmt.Sprintf("cuCtxSetCurrent(device %d primary context)", ordinal), err)
	}
	b := &cudaBackend{dev: dev, ctx: ctx, info: info}
	b.recordThread()
	if err := b.warmUp(); err != nil {
		_ = b.Close()
		return nil, err
	}
	return b, nil
}

// warmUpBytes is the size of the allocation warmUp makes: one 2 MiB page.
const warmUpBytes = 2 << 20

// warmUp makes one allocation, memset and free on the calling thread, so
// that the driver's first-use work on a new thread is paid when the backend
// opens, not by the first arena build (what it saves the first build is in
// docs/performance.md). Errors: the driver's, translated.
func (b *cudaBackend) warmUp() error {
	p, err := b.Alloc(warmUpBytes)
	if err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if err := b.Memset(p, 0, warmUpBytes); err != nil {
		_ = b.Free(p)
		return fmt.Errorf("warm-up: %w", err)
	}
	if err := b.Free(p); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return nil
}

// cudaDeviceInfo reads the device's name, memory and compute capability. These
// calls need no context.
func cudaDeviceInfo(dev cu.Device, ordinal int) (DeviceInfo, error) {
	info := DeviceInfo{Backend: KindCUDA, Ordinal: ordinal}
	var err error
	if info.Name, err = dev.Name(); err != nil {
		return DeviceInfo{}, cudaErr(fmt.Sprintf("cuDeviceGetName(device %d)", ordinal), err)
	}
	if info.TotalBytes, err = dev.TotalMem(); err != nil {
		return DeviceInfo{}, cudaErr(fmt.Sprintf("cuDeviceTotalMem(device %d)", ordinal), err)
	}
	if info.ComputeMajor, err = dev.Attribute(cu.ComputeCapabilityMajor); err != nil {
		return DeviceInfo{}, cudaErr(fmt.Sprintf("cuDeviceGetAttribute(compute capability major, device %d)", ordinal), err)
	}
	if info.ComputeMinor, err = dev.Attribute(cu.ComputeCapabilityMinor); err != nil {
		return DeviceInfo{}, cudaErr(fmt.Sprintf("cuDeviceGetAttribute(compute capability minor, device %d)", ordinal), err)
	}
	return info, nil
}

// cudaDeviceCount returns the number of CUDA devices (cuDeviceGetCount). The
// call needs no context; it still runs with the calling goroutine locked to
// its thread (a no-op on the GPU actor's thread, which is locked already), so
// that no driver call of this package ever runs on an unlocked goroutine.
func cudaDeviceCount() (int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	n, err := cu.NumDevices()
	if err != nil {
		return 0, cudaErr("cuDeviceGetCount", err)
	}
	return n, nil
}

// Info describes the device; it was read when the backend was opened.
func (b *cudaBackend) Info() DeviceInfo { return b.info }

func (b *cudaBackend) checkOpen(op string) error {
	if b.closed {
		return fmt.Errorf("%s on cuda device %d: %w", op, b.info.Ordinal, ErrClosed)
	}
	return nil
}

// Alloc allocates bytes bytes of device memory (cuMemAlloc).
func (b *cudaBackend) Alloc(bytes int64) (device.DevicePtr, error) {
	if err := b.checkOpen("alloc"); err != nil {
		return 0, err
	}
	if bytes <= 0 {
		return 0, fmt.Errorf("cuMemAlloc(%d B): %w: size must be > 0", bytes, ErrInvalidValue)
	}
	ptr, err := cu.MemAlloc(bytes)
	if err != nil {
		return 0, cudaErr(fmt.Sprintf("cuMemAlloc(%d B)", bytes), err)
	}
	return device.DevicePtr(ptr), nil
}

// Free frees an allocation made by Alloc (cuMemFree). A pointer the driver
// does not know (NULL, a double free) gives an error that is both
// ErrNotAllocated, as hostsim reports it, and ErrInvalidValue, as the driver
// does.
func (b *cudaBackend) Free(ptr device.DevicePtr) error {
	if err := b.checkOpen("free"); err != nil {
		return err
	}
	if ptr == 0 {
		return fmt.Errorf("cuMemFree(NULL): %w", ErrNotAllocated)
	}
	if err := cu.MemFree(cu.DevicePtr(ptr)); err != nil {
		op := fmt.Sprintf("cuMemFree(%#x)", uint64(ptr))
		if isInvalidValue(err) {
			return fmt.Errorf("%s: %w: %w (%s)", op, ErrNotAllocated, ErrInvalidValue, cudaResultText(err))
		}
		return cudaErr(op, err)
	}
	return nil
}

// Memset sets bytes bytes at ptr to value (cuMemsetD8). Zero bytes is a
// no-op; a negative count is ErrInvalidValue. For device memory the driver
// may return before the memset is done; it runs on the default stream, so a
// later copy to the host sees its bytes, and a failure in it may be reported
// by a later call.
func (b *cudaBackend) Memset(ptr device.DevicePtr, value byte, bytes int64) error {
	if err := b.checkOpen("memset"); err != nil {
		return err
	}
	op := func() string { return fmt.Sprintf("cuMemsetD8(%#x, %#02x, %d B)", uint64(ptr), value, bytes) }
	if err := checkSpan(op, ptr, bytes); err != nil || bytes == 0 {
		return err
	}
	if err := cu.MemsetD8(cu.DevicePtr(ptr), value, bytes); err != nil {
		return cudaErr(op(), err)
	}
	return nil
}

// CopyHtoD copies src to dst (cuMemcpyHtoD, synchronous). An empty src is a
// no-op.
func (b *cudaBackend) CopyHtoD(dst device.DevicePtr, src []byte) error {
	if err := b.checkOpen("copy host→device"); err != nil {
		return err
	}
	op := func() string { return fmt.Sprintf("cuMemcpyHtoD(%#x, %d B)", uint64(dst), len(src)) }
	if err := checkSpan(op, dst, int64(len(src))); err != nil || len(src) == 0 {
		return err
	}
	// The pointer goes straight to C for the length of the call: cgo pins
	// it, and the driver copies synchronously from pageable memory.
	if err := cu.MemcpyHtoD(cu.DevicePtr(dst), unsafe.Pointer(&src[0]), int64(len(src))); err != nil {
		return cudaErr(op(), err)
	}
	return nil
}

// CopyDtoH copies len(dst) bytes at src to dst (cuMemcpyDtoH, synchronous).
// An empty dst is a no-op.
func (b *cudaBackend) CopyDtoH(dst []byte, src device.DevicePtr) error {
	if err := b.checkOpen("copy device→host"); err != nil {
		return err
	}
	op := func() string { return fmt.Sprintf("cuMemcpyDtoH(%#x, %d B)", uint64(src), len(dst)) }
	if err := checkSpan(op, src, int64(len(dst))); err != nil || len(dst) == 0 {
		return err
	}
	if err := cu.MemcpyDtoH(unsafe.Pointer(&dst[0]), cu.DevicePtr(src), int64(len(dst))); err != nil {
		return cudaErr(op(), err)
	}
	return nil
}

// CopyDtoD copies bytes bytes from src to dst on the device (cuMemcpyDtoD).
// Zero bytes is a no-op. Like cuMemsetD8 the driver may return before the
// copy is done; it runs on the default stream, so a later copy to the host
// sees its bytes.
func (b *cudaBackend) CopyDtoD(dst, src device.DevicePtr, bytes int64) error {
	if err := b.checkOpen("copy device→device"); err != nil {
		return err
	}
	op := func() string { return fmt.Sprintf("cuMemcpyDtoD(%#x ← %#x, %d B)", uint64(dst), uint64(src), bytes) }
	if err := checkSpan(op, src, bytes); err != nil || bytes == 0 {
		return err
	}
	if dst == 0 {
		return fmt.Errorf("%s: %w: NULL destination", op(), ErrInvalidValue)
	}
	if err := cu.MemcpyDtoD(cu.DevicePtr(dst), cu.DevicePtr(src), bytes); err != nil {
		return cudaErr(op(), err)
	}
	return nil
}

// MemInfo returns the device's free and total memory (cuMemGetInfo); free
// counts every process's use, not only ours.
func (b *cudaBackend) MemInfo() (freeBytes, totalBytes int64, err error) {
	if err := b.checkOpen("meminfo"); err != nil {
		return 0, 0, err
	}
	freeBytes, totalBytes, err = cu.MemInfo()
	if err != nil {
		return 0, 0, cudaErr(fmt.Sprintf("cuMemGetInfo(device %d)", b.info.Ordinal), err)
	}
	return freeBytes, totalBytes, nil
}

// Close unlocks the staging buffers still registered, destroys the upload
// stream, unloads the modules and destroys the step stream and its events,
// makes no context current on the calling thread and releases the primary
// context (cuDevicePrimaryCtxRelease). It frees no device memory itself:
// the GPU actor frees its ledger first. If this was the last retain, the driver
// destroys the primary context, and with it whatever was still allocated in
// it. A second Close is a no-op.
func (b *cudaBackend) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	first := b.closeStaging()
	if err := b.closeCompute(); err != nil && first == nil {
		first = err
	}
	if err := cu.SetCurrentContext(cu.CUContext{}); err != nil && first == nil {
		first = cudaErr(fmt.Sprintf("cuCtxSetCurrent(NULL) on closing device %d", b.info.Ordinal), err)
	}
	if err := b.dev.ReleasePrimaryCtx(); err != nil && first == nil {
		first = cudaErr(fmt.Sprintf("cuDevicePrimaryCtxRelease(device %d)", b.info.Ordinal), err)
	}
	return first
}

// checkSpan refuses a negative size, and a NULL pointer with a positive one,
// before the driver sees them. op names the call for the error; it is
// formatted only on an error, since a cold fmt.Sprintf was most of a
// memset's time before its driver call (docs/performance.md).
func checkSpan(op func() string, ptr device.DevicePtr, bytes int64) error {
	switch {
	case bytes < 0:
		return fmt.Errorf("%s: %w: size must be ≥ 0", op(), ErrInvalidValue)
	case bytes > 0 && ptr == 0:
		return fmt.Errorf("%s: %w: NULL pointer", op(), ErrInvalidValue)
	}
	return nil
}
