//go:build cuda

package gpuworker

/*
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

enum { gpuarena_max_args = 64 };

// gpuarena_launch calls cuLaunchKernel with one parameter pointer per
// 8-byte word of args; with pad, the pointers past n point to a zero word,
// so a kernel with more parameters than n (a cubin's count is unknown)
// never makes the driver read a wild pointer. The driver copies the
// parameters before it returns, so args need live only for the call.
static CUresult gpuarena_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
		unsigned bx, unsigned by, unsigned bz, unsigned shared, CUstream s,
		const unsigned long long *args, int n, int pad) {
	static const unsigned long long zero = 0;
	void *params[gpuarena_max_args];
	int i;
	for (i = 0; i < n; i++) params[i] = (void *)&args[i];
	if (pad) for (; i < gpuarena_max_args; i++) params[i] = (void *)&zero;
	return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, s, n > 0 || pad ? params : NULL, NULL);
}

// gpuarena_module_load loads an image with the JIT's error log kept in log.
static CUresult gpuarena_module_load(CUmodule *m, const void *image, char *log, size_t size) {
	CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *vals[2] = {log, (void *)(uintptr_t)size};
	return cuModuleLoadDataEx(m, image, 2, opts, vals);
}

static int gpuarena_on_thread(pthread_t t) { return pthread_equal(pthread_self(), t); }
*/
import "C"

import (
	"errors"
	"fmt"
	"reflect"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/gpuarena/gpuarena/device"
)

// gorgonia.org/cu wraps modules and launches, but its Function.Launch
// mallocs twice and copies every argument on each launch, and its Module
// and Function hide the driver handles; this file calls cuModuleLoadDataEx,
// cuModuleGetFunction, cuModuleUnload and cuLaunchKernel itself (one cgo
// call per launch) and uses cu for streams and events.

var (
	_ Compute       = (*cudaBackend)(nil)
	_ threadChecker = (*cudaBackend)(nil)
)

// cudaCompute is the cuda backend's compute state (GPU thread only).
type cudaCompute struct {
	// thread is the GPU thread, for onGPUThread.
	thread C.pthread_t
	// stream is the step stream, made by the first call that needs it
	// (blocking: CU_STREAM_DEFAULT); streamC its driver handle.
	stream  cu.Stream
	streamC C.CUstream
	made    bool
	// modules and functions by handle; nil once unloaded.
	modules   []C.CUmodule
	functions []C.CUfunction
	events    []cu.Event
	// raw: a step took the raw handles (CUDAStep), so the next wait is for
	// the whole context, not only the step stream.
	raw bool
	// graphs are the instantiated graphs by handle, nil once destroyed
	// (cuda_graph.go).
	graphs []C.CUgraphExec
}

// recordThread records the calling thread as the GPU thread; newCUDABackend
// and BindThread call it.
func (b *cudaBackend) recordThread() { b.compute.thread = C.pthread_self() }

// onGPUThread compares pthread_self with the GPU thread: one cgo call,
// cheaper than gettid.
func (b *cudaBackend) onGPUThread() bool { return C.gpuarena_on_thread(b.compute.thread) != 0 }

// stepStream makes the step stream on first use.
func (b *cudaBackend) stepStream() error {
	c := &b.compute
	if c.made {
		return nil
	}
	s, err := cu.MakeStream(cu.DefaultStream)
	if err != nil {
		return cudaErr("cuStreamCreate(step stream)", err)
	}
	c.stream, c.streamC, c.made = s, C.CUstream(unsafe.Pointer(s.C())), true
	return nil
}

// cuResultError is r as gorgonia.org/cu's error value (its type is
// unexported: made through reflect), so cudaErr translates it.
func cuResultError(r C.CUresult) error {
	v := reflect.New(reflect.TypeOf(cu.NotFound)).Elem()
	v.SetInt(int64(r))
	return v.Interface().(error)
}

// LoadModule loads image (cuModuleLoadDataEx, the image copied to C memory
// with a terminating NUL, as PTX text needs) and looks up each name
// (cuModuleGetFunction).
func (b *cudaBackend) LoadModule(image []byte, format string, names []string) (ModuleHandle, []KernelHandle, []error, error) {
	if err := b.checkOpen("load module"); err != nil {
		return 0, nil, nil, err
	}
	img := C.malloc(C.size_t(len(image) + 1))
	defer C.free(img)
	buf := unsafe.Slice((*byte)(img), len(image)+1)
	copy(buf, image)
	buf[len(image)] = 0
	const logBytes = 8 << 10
	log := (*C.char)(C.calloc(logBytes, 1))
	defer C.free(unsafe.Pointer(log))
	var m C.CUmodule
	if r := C.gpuarena_module_load(&m, img, log, logBytes); r != C.CUDA_SUCCESS {
		return 0, nil, nil, moduleLoadErr(format, len(image), r, C.GoString(log))
	}
	ks := make([]KernelHandle, len(names))
	errs := make([]error, len(names))
	for i, n := range names {
		cn := C.CString(n)
		var f C.CUfunction
		r := C.cuModuleGetFunction(&f, m, cn)
		C.free(unsafe.Pointer(cn))
		switch r {
		case C.CUDA_SUCCESS:
			ks[i] = KernelHandle(len(b.compute.functions))
			b.compute.functions = append(b.compute.functions, f)
		case C.CUDA_ERROR_NOT_FOUND:
			errs[i] = fmt.Errorf("%w: cuModuleGetFunction(%q): %s", ErrNoFunction, n, cudaResultText(cuResultError(r)))
		default:
			_ = C.cuModuleUnload(m) // the first error is the one to report
			return 0, nil, nil, cudaErr(fmt.Sprintf("cuModuleGetFunction(%q)", n), cuResultError(r))
		}
	}
	b.compute.modules = append(b.compute.modules, m)
	return ModuleHandle(len(b.compute.modules) - 1), ks, errs, nil
}

// moduleLoadErr translates cuModuleLoadDataEx's result: an image the
// driver or its JIT refuses is ErrBadModule with the JIT's log; a fault
// already on the context is ErrDeviceFault (cudaErr).
func moduleLoadErr(format string, n int, r C.CUresult, log string) error {
	op := fmt.Sprintf("cuModuleLoadDataEx(%s, %d B)", format, n)
	switch r {
	case C.CUDA_ERROR_INVALID_PTX, C.CUDA_ERROR_INVALID_IMAGE, C.CUDA_ERROR_NO_BINARY_FOR_GPU,
		C.CUDA_ERROR_UNSUPPORTED_PTX_VERSION, C.CUDA_ERROR_INVALID_SOURCE, C.CUDA_ERROR_INVALID_VALUE:
		if log != "" {
			return fmt.Errorf("%s: %w (%s): %s", op, ErrBadModule, cudaResultText(cuResultError(r)), log)
		}
		return fmt.Errorf("%s: %w (%s)", op, ErrBadModule, cudaResultText(cuResultError(r)))
	}
	return cudaErr(op, cuResultError(r))
}

// UnloadModule unloads a module (cuModuleUnload).
func (b *cudaBackend) UnloadModule(h ModuleHandle) error {
	if err := b.checkOpen("unload module"); err != nil {
		return err
	}
	m := b.compute.modules[h]
	b.compute.modules[h] = nil
	if r := C.cuModuleUnload(m); r != C.CUDA_SUCCESS {
		return cudaErr("cuModuleUnload", cuResultError(r))
	}
	return nil
}

// Launch launches on the step stream (cuLaunchKernel, through
// gpuarena_launch). The device's refusal of a configuration
// (CUDA_ERROR_INVALID_VALUE, _LAUNCH_OUT_OF_RESOURCES) is ErrLaunchConfig.
func (b *cudaBackend) Launch(k KernelHandle, cfg device.LaunchConfig, args []uint64, exact bool) error {
	if err := b.stepStream(); err != nil {
		return err
	}
	var p *C.ulonglong
	if len(args) > 0 {
		p = (*C.ulonglong)(unsafe.Pointer(&args[0]))
	}
	pad := C.int(0)
	if !exact {
		pad = 1
	}
	g, bl := cfg.Grid, cfg.Block
	r := C.gpuarena_launch(b.compute.functions[k], C.uint(g.X), C.uint(g.Y), C.uint(g.Z),
		C.uint(bl.X), C.uint(bl.Y), C.uint(bl.Z), C.uint(cfg.SharedBytes), b.compute.streamC, p, C.int(len(args)), pad)
	if r == C.CUDA_SUCCESS {
		return nil
	}
	op := fmt.Sprintf("cuLaunchKernel(grid %v, block %v, %d B shared)", g, bl, cfg.SharedBytes)
	switch r {
	case C.CUDA_ERROR_INVALID_VALUE, C.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
		return fmt.Errorf("%s: %w (%s)", op, ErrLaunchConfig, cudaResultText(cuResultError(r)))
	}
	return cudaErr(op, cuResultError(r))
}

// StreamCopyHtoD copies on the step stream (cuMemcpyHtoDAsync).
func (b *cudaBackend) StreamCopyHtoD(dst device.DevicePtr, src []byte) error {
	op := func() string { return fmt.Sprintf("cuMemcpyHtoDAsync(%#x, %d B, step stream)", uint64(dst), len(src)) }
	if err := checkSpan(op, dst, int64(len(src))); err != nil || len(src) == 0 {
		return err
	}
	if err := b.stepStream(); err != nil {
		return err
	}
	if err := cu.MemcpyHtoDAsync(cu.DevicePtr(dst), unsafe.Pointer(&src[0]), int64(len(src)), b.compute.stream); err != nil {
		return cudaErr(op(), err)
	}
	return nil
}

// StreamCopyDtoH copies on the step stream (cuMemcpyDtoHAsync).
func (b *cudaBackend) StreamCopyDtoH(dst []byte, src device.DevicePtr) error {
	op := func() string { return fmt.Sprintf("cuMemcpyDtoHAsync(%#x, %d B, step stream)", uint64(src), len(dst)) }
	if err := checkSpan(op, src, int64(len(dst))); err != nil || len(dst) == 0 {
		return err
	}
	if err := b.stepStream(); err != nil {
		return err
	}
	if err := cu.MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), cu.DevicePtr(src), int64(len(dst)), b.compute.stream); err != nil {
		return cudaErr(op(), err)
	}
	return nil
}

// NewEvent makes a timing event (cuEventCreate, CU_EVENT_DEFAULT).
func (b *cudaBackend) NewEvent() (EventHandle, error) {
	e, err := cu.MakeEvent(cu.DefaultEvent)
	if err != nil {
		return 0, cudaErr("cuEventCreate", err)
	}
	b.compute.events = append(b.compute.events, e)
	return EventHandle(len(b.compute.events) - 1), nil
}

// RecordEvent records on the step stream (cuEventRecord).
func (b *cudaBackend) RecordEvent(e EventHandle) error {
	if err := b.stepStream(); err != nil {
		return err
	}
	if err := b.compute.events[e].Record(b.compute.stream); err != nil {
		return cudaErr("cuEventRecord(step stream)", err)
	}
	return nil
}

// EventElapsed waits for end (cuEventSynchronize) and reads the time
// between the two (cuEventElapsedTime, milliseconds as a float).
func (b *cudaBackend) EventElapsed(start, end EventHandle) (time.Duration, error) {
	e := b.compute.events
	if err := e[end].Synchronize(); err != nil {
		return 0, cudaErr("cuEventSynchronize", err)
	}
	ms, err := e[start].Elapsed(e[end])
	if err != nil {
		return 0, cudaErr("cuEventElapsedTime", err)
	}
	return time.Duration(ms * float64(time.Millisecond)), nil
}

// Synchronize waits for the step stream (cuStreamSynchronize), or for the
// whole context (cuCtxSynchronize) after a step took the raw handles.
func (b *cudaBackend) Synchronize() error {
	c := &b.compute
	if c.raw {
		c.raw = false
		if err := cu.Synchronize(); err != nil {
			return cudaErr("cuCtxSynchronize", err)
		}
		return nil
	}
	if !c.made {
		return nil
	}
	if err := c.stream.Synchronize(); err != nil {
		return cudaErr("cuStreamSynchronize(step stream)", err)
	}
	return nil
}

// closeCompute destroys the graphs, unloads the modules and destroys the
// events and the step stream, going on after a failure (after a device fault each fails).
func (b *cudaBackend) closeCompute() error {
	c := &b.compute
	errs := b.closeGraphs()
	for _, m := range c.modules {
		if m != nil {
			if r := C.cuModuleUnload(m); r != C.CUDA_SUCCESS {
				errs = append(errs, cudaErr("cuModuleUnload", cuResultError(r)))
			}
		}
	}
	for i := range c.events {
		if err := cu.DestroyEvent(&c.events[i]); err != nil {
			errs = append(errs, cudaErr("cuEventDestroy", err))
		}
	}
	if c.made {
		if err := c.stream.Destroy(); err != nil {
			errs = append(errs, cudaErr("cuStreamDestroy(step stream)", err))
		}
	}
	*c = cudaCompute{thread: c.thread}
	return errors.Join(errs...)
}
