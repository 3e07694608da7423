package gpuworker

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker/internal/pinned"
)

// KindHostSim is the name the simulated device registers under, and the
// backend a BackendConfig with no Kind selects.
const KindHostSim = "hostsim"

func init() {
	Register(KindHostSim, func(c BackendConfig) (Backend, error) { return NewHostSim(c.HostSim) })
}

// H200Bytes is the default capacity of the simulated device: an NVIDIA
// H200's total memory as its driver reports it, 150,109,880,320 B (139.80
// GiB; arena.H200TotalBytes, measured on the project's H200), not the data
// sheet's 141 GB (design.md §4).
const H200Bytes int64 = arena.H200TotalBytes

// HostSimConfig configures the simulated device.
type HostSimConfig struct {
	// Name is reported by Info ("hostsim H200"). Default "hostsim".
	Name string
	// TotalBytes is the device's capacity in bytes. Default H200Bytes.
	TotalBytes int64
	// UsedByOthersBytes simulates memory other processes hold, in bytes, in
	// [0, TotalBytes]: MemInfo reports it as not free and Alloc cannot use
	// it (no host memory backs it). Default 0.
	UsedByOthersBytes int64
	// RecordThreads makes the device record the thread id (ThreadID: the OS
	// thread id on Linux) of every call, for affinity tests; read them with
	// Threads. Faults are injected by wrapping the device (WithFaults).
	RecordThreads bool
	// Kernels are the Go kernels a loaded module's .entry names map to
	// (hostsim_kernels.go). Default DefaultKernels.
	Kernels *KernelRegistry
}

// HostSim is the simulated device: each allocation is real host memory, so
// memset/copy/readback move real bytes. On Linux it is private anonymous
// memory reserved lazily with mmap (MAP_NORESERVE), so a 100 GiB arena costs
// no RAM until it is touched; elsewhere it comes from the Go heap
// (hostsim_mem_linux.go, hostsim_mem_other.go). Like the driver it refuses
// zero-byte allocations and returns ErrOutOfMemory past its capacity.
// Pointers are the allocations' addresses, so they are unique and never
// NULL.
//
// HostSim is used from the GPU actor's thread only; Threads and BytesInUse may
// be called from any goroutine.
type HostSim struct {
	cfg HostSimConfig

	mu      sync.Mutex // guards allocs' sizes for BytesInUse, and threads
	allocs  map[device.DevicePtr][]byte
	inUse   int64
	threads map[int]int // thread id → calls

	compute hostCompute // modules, kernels, events (GPU thread only)
}

// NewHostSim returns a simulated device. It returns ErrInvalidValue for a
// negative capacity, or memory used by others outside [0, capacity].
func NewHostSim(cfg HostSimConfig) (*HostSim, error) {
	if cfg.TotalBytes < 0 {
		return nil, fmt.Errorf("hostsim capacity %d B: %w: capacity must be ≥ 0 (0 means the default, %d B)", cfg.TotalBytes, ErrInvalidValue, H200Bytes)
	}
	if cfg.TotalBytes == 0 {
		cfg.TotalBytes = H200Bytes
	}
	if cfg.UsedByOthersBytes < 0 || cfg.UsedByOthersBytes > cfg.TotalBytes {
		return nil, fmt.Errorf("hostsim used by others %d B: %w: must be in [0, capacity = %d B]", cfg.UsedByOthersBytes, ErrInvalidValue, cfg.TotalBytes)
	}
	if cfg.Name == "" {
		cfg.Name = "hostsim"
	}
	return &HostSim{
		cfg:     cfg,
		allocs:  make(map[device.DevicePtr][]byte),
		threads: make(map[int]int),
	}, nil
}

// Info describes the simulated device (compute capability 9.0, like Hopper).
func (h *HostSim) Info() DeviceInfo {
	return DeviceInfo{Backend: KindHostSim, Name: h.cfg.Name, TotalBytes: h.cfg.TotalBytes, ComputeMajor: 9, ComputeMinor: 0}
}

// Threads returns how many calls each thread made, by ThreadID (only with
// RecordThreads).
func (h *HostSim) Threads() map[int]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[int]int, len(h.threads))
	for k, v := range h.threads {
		out[k] = v
	}
	return out
}

// BytesInUse is the sum of the live allocations' sizes, in bytes.
func (h *HostSim) BytesInUse() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inUse
}

// record counts a call on the calling thread, with RecordThreads.
func (h *HostSim) record() {
	if h.cfg.RecordThreads {
		tid := pinned.ThreadID()
		h.mu.Lock()
		h.threads[tid]++
		h.mu.Unlock()
	}
}

// Alloc reserves bytes bytes of host memory (hostMemory).
func (h *HostSim) Alloc(bytes int64) (device.DevicePtr, error) {
	h.record()
	if bytes <= 0 {
		return 0, fmt.Errorf("alloc %d B: %w: size must be > 0", bytes, ErrInvalidValue)
	}
	h.mu.Lock()
	free := h.cfg.TotalBytes - h.cfg.UsedByOthersBytes - h.inUse
	h.mu.Unlock()
	if bytes > free {
		return 0, fmt.Errorf("alloc %d B with %d B free of %d B: %w", bytes, free, h.cfg.TotalBytes, ErrOutOfMemory)
	}
	if uint64(bytes) > uint64(^uint(0)>>1) {
		return 0, fmt.Errorf("alloc %d B: %w: larger than the address space", bytes, ErrOutOfMemory)
	}
	mem, err := hostMemory(int(bytes))
	if err != nil {
		return 0, fmt.Errorf("alloc %d B: %v: %w", bytes, err, ErrOutOfMemory)
	}
	ptr := device.DevicePtr(uintptr(unsafe.Pointer(&mem[0])))
	h.mu.Lock()
	h.allocs[ptr] = mem
	h.inUse += bytes
	h.mu.Unlock()
	return ptr, nil
}

// Free gives an allocation's memory back (releaseHostMemory).
func (h *HostSim) Free(ptr device.DevicePtr) error {
	h.record()
	h.mu.Lock()
	mem, ok := h.allocs[ptr]
	if ok {
		delete(h.allocs, ptr)
		h.inUse -= int64(len(mem))
	}
	h.mu.Unlock()
	if !ok {
		return fmt.Errorf("free %#x: %w", uint64(ptr), ErrNotAllocated)
	}
	if err := releaseHostMemory(mem); err != nil {
		return fmt.Errorf("free %#x: %v: %w", uint64(ptr), err, ErrDriver)
	}
	return nil
}

// span returns the host bytes [ptr, ptr+n) when they lie inside one allocation.
func (h *HostSim) span(ptr device.DevicePtr, n int64) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("%d B at %#x: %w: size must be ≥ 0", n, uint64(ptr), ErrInvalidValue)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for base, mem := range h.allocs {
		if ptr >= base && ptr < base+device.DevicePtr(len(mem)) {
			off := int64(ptr - base)
			if n > int64(len(mem))-off {
				return nil, fmt.Errorf("%d B at %#x (offset %d of a %d B allocation): %w", n, uint64(ptr), off, len(mem), ErrOutOfRange)
			}
			return mem[off : off+n], nil
		}
	}
	return nil, fmt.Errorf("%#x: %w", uint64(ptr), ErrNotAllocated)
}

// Memset sets bytes bytes at ptr to value. A zero memset goes through
// zeroHostMemory, which on Linux drops whole pages (madvise MADV_DONTNEED),
// so zeroing a large buffer costs no RAM.
func (h *HostSim) Memset(ptr device.DevicePtr, value byte, bytes int64) error {
	h.record()
	dst, err := h.span(ptr, bytes)
	if err != nil {
		return fmt.Errorf("memset: %w", err)
	}
	if value == 0 {
		zeroHostMemory(dst)
		return nil
	}
	for i := range dst {
		dst[i] = value
	}
	return nil
}

// CopyHtoD copies src to dst.
func (h *HostSim) CopyHtoD(dst device.DevicePtr, src []byte) error {
	h.record()
	d, err := h.span(dst, int64(len(src)))
	if err != nil {
		return fmt.Errorf("copy host→device: %w", err)
	}
	copy(d, src)
	return nil
}

// CopyDtoH copies len(dst) bytes at src to dst.
func (h *HostSim) CopyDtoH(dst []byte, src device.DevicePtr) error {
	h.record()
	s, err := h.span(src, int64(len(dst)))
	if err != nil {
		return fmt.Errorf("copy device→host: %w", err)
	}
	copy(dst, s)
	return nil
}

// CopyDtoD copies bytes bytes from src to dst (overlapping ranges allowed).
func (h *HostSim) CopyDtoD(dst, src device.DevicePtr, bytes int64) error {
	h.record()
	s, err := h.span(src, bytes)
	if err != nil {
		return fmt.Errorf("copy device→device (source): %w", err)
	}
	d, err := h.span(dst, bytes)
	if err != nil {
		return fmt.Errorf("copy device→device (destination): %w", err)
	}
	copy(d, s)
	return nil
}

// MemInfo returns capacity minus bytes in use (this process's and, with
// HostSimConfig.UsedByOthersBytes, others'), and capacity.
func (h *HostSim) MemInfo() (freeBytes, totalBytes int64, err error) {
	h.record()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cfg.TotalBytes - h.cfg.UsedByOthersBytes - h.inUse, h.cfg.TotalBytes, nil
}

// Close gives back whatever is still allocated.
func (h *HostSim) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var first error
	for ptr, mem := range h.allocs {
		if err := releaseHostMemory(mem); err != nil && first == nil {
			first = fmt.Errorf("close: %#x: %v: %w", uint64(ptr), err, ErrDriver)
		}
		delete(h.allocs, ptr)
		h.inUse -= int64(len(mem))
	}
	return first
}
