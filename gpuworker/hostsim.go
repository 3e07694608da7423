package gpuworker

import (
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gpuarena/gpuarena/messages"
)

// H200Bytes is the default capacity of the simulated device: 141 GiB, the
// memory of an NVIDIA H200 (design.md §4).
const H200Bytes int64 = 141 << 30

// HostSimConfig configures the simulated device.
type HostSimConfig struct {
	// Name is reported by Info ("hostsim H200"). Default "hostsim".
	Name string
	// TotalBytes is the device's capacity in bytes. Default H200Bytes.
	TotalBytes int64
	// Faults injects failures; the zero value injects none.
	Faults Faults
	// RecordThreads makes the device record the OS thread id (gettid) of every
	// call, for affinity tests; read them with Threads.
	RecordThreads bool
}

// HostSim is the simulated device: each allocation is real, private,
// anonymous memory reserved lazily with mmap (MAP_NORESERVE), so a 100 GiB
// arena costs no RAM until it is touched, and memset/copy/readback move real
// bytes. Like the driver it refuses zero-byte allocations and returns
// ErrOutOfMemory past its capacity. Pointers are the mappings' addresses, so
// they are unique and never NULL.
//
// HostSim is used from the GPU actor's thread only; Threads and BytesInUse may
// be called from any goroutine.
type HostSim struct {
	cfg    HostSimConfig
	faults *faultState

	mu      sync.Mutex // guards allocs' sizes for BytesInUse, and threads
	allocs  map[messages.DevicePtr][]byte
	inUse   int64
	threads map[int]int // thread id → calls
}

// NewHostSim returns a simulated device. It returns ErrInvalidValue for a
// negative capacity.
func NewHostSim(cfg HostSimConfig) (*HostSim, error) {
	if cfg.TotalBytes < 0 {
		return nil, fmt.Errorf("hostsim capacity %d B: %w: capacity must be ≥ 0 (0 means the default, %d B)", cfg.TotalBytes, ErrInvalidValue, H200Bytes)
	}
	if cfg.TotalBytes == 0 {
		cfg.TotalBytes = H200Bytes
	}
	if cfg.Name == "" {
		cfg.Name = "hostsim"
	}
	return &HostSim{
		cfg:     cfg,
		faults:  newFaultState(cfg.Faults),
		allocs:  make(map[messages.DevicePtr][]byte),
		threads: make(map[int]int),
	}, nil
}

// Info describes the simulated device (compute capability 9.0, like Hopper).
func (h *HostSim) Info() DeviceInfo {
	return DeviceInfo{Backend: "hostsim", Name: h.cfg.Name, TotalBytes: h.cfg.TotalBytes, ComputeMajor: 9, ComputeMinor: 0}
}

// Threads returns how many calls each OS thread made (only with RecordThreads).
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

func (h *HostSim) enter(op faultOp) error {
	if h.cfg.RecordThreads {
		tid := unix.Gettid()
		h.mu.Lock()
		h.threads[tid]++
		h.mu.Unlock()
	}
	return h.faults.before(op)
}

// Alloc maps bytes bytes of lazily-backed memory.
func (h *HostSim) Alloc(bytes int64) (messages.DevicePtr, error) {
	if err := h.enter(opAlloc); err != nil {
		return 0, err
	}
	if bytes <= 0 {
		return 0, fmt.Errorf("alloc %d B: %w: size must be > 0", bytes, ErrInvalidValue)
	}
	h.mu.Lock()
	free := h.cfg.TotalBytes - h.inUse
	h.mu.Unlock()
	if bytes > free {
		return 0, fmt.Errorf("alloc %d B with %d B free of %d B: %w", bytes, free, h.cfg.TotalBytes, ErrOutOfMemory)
	}
	if uint64(bytes) > uint64(^uint(0)>>1) {
		return 0, fmt.Errorf("alloc %d B: %w: larger than the address space", bytes, ErrOutOfMemory)
	}
	mem, err := unix.Mmap(-1, 0, int(bytes), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return 0, fmt.Errorf("alloc %d B: mmap: %v: %w", bytes, err, ErrOutOfMemory)
	}
	ptr := messages.DevicePtr(uintptr(unsafe.Pointer(&mem[0])))
	h.mu.Lock()
	h.allocs[ptr] = mem
	h.inUse += bytes
	h.mu.Unlock()
	return ptr, nil
}

// Free unmaps an allocation.
func (h *HostSim) Free(ptr messages.DevicePtr) error {
	if err := h.enter(opFree); err != nil {
		return err
	}
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
	if err := unix.Munmap(mem); err != nil {
		return fmt.Errorf("free %#x: munmap: %v: %w", uint64(ptr), err, ErrDriver)
	}
	return nil
}

// span returns the host bytes [ptr, ptr+n) when they lie inside one allocation.
func (h *HostSim) span(ptr messages.DevicePtr, n int64) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("%d B at %#x: %w: size must be ≥ 0", n, uint64(ptr), ErrInvalidValue)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for base, mem := range h.allocs {
		if ptr >= base && ptr < base+messages.DevicePtr(len(mem)) {
			off := int64(ptr - base)
			if n > int64(len(mem))-off {
				return nil, fmt.Errorf("%d B at %#x (offset %d of a %d B allocation): %w", n, uint64(ptr), off, len(mem), ErrOutOfRange)
			}
			return mem[off : off+n], nil
		}
	}
	return nil, fmt.Errorf("%#x: %w", uint64(ptr), ErrNotAllocated)
}

// Memset sets bytes bytes at ptr to value. A zero memset of whole pages drops
// them (madvise MADV_DONTNEED), so zeroing a large buffer costs no RAM.
func (h *HostSim) Memset(ptr messages.DevicePtr, value byte, bytes int64) error {
	if err := h.enter(opMemset); err != nil {
		return err
	}
	dst, err := h.span(ptr, bytes)
	if err != nil {
		return fmt.Errorf("memset: %w", err)
	}
	if value == 0 && dropPages(dst) {
		return nil
	}
	for i := range dst {
		dst[i] = value
	}
	return nil
}

// dropPages zeroes dst by returning its pages to the kernel when dst is
// page-aligned and a whole number of pages; it reports whether it did.
func dropPages(dst []byte) bool {
	page := unix.Getpagesize()
	if len(dst) == 0 || len(dst)%page != 0 || uintptr(unsafe.Pointer(&dst[0]))%uintptr(page) != 0 {
		return false
	}
	return unix.Madvise(dst, unix.MADV_DONTNEED) == nil
}

// CopyHtoD copies src to dst.
func (h *HostSim) CopyHtoD(dst messages.DevicePtr, src []byte) error {
	if err := h.enter(opCopy); err != nil {
		return err
	}
	d, err := h.span(dst, int64(len(src)))
	if err != nil {
		return fmt.Errorf("copy host→device: %w", err)
	}
	copy(d, src)
	return nil
}

// CopyDtoH copies len(dst) bytes at src to dst.
func (h *HostSim) CopyDtoH(dst []byte, src messages.DevicePtr) error {
	if err := h.enter(opCopy); err != nil {
		return err
	}
	s, err := h.span(src, int64(len(dst)))
	if err != nil {
		return fmt.Errorf("copy device→host: %w", err)
	}
	copy(dst, s)
	return nil
}

// CopyDtoD copies bytes bytes from src to dst (overlapping ranges allowed).
func (h *HostSim) CopyDtoD(dst, src messages.DevicePtr, bytes int64) error {
	if err := h.enter(opCopy); err != nil {
		return err
	}
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

// MemInfo returns capacity minus bytes in use, and capacity.
func (h *HostSim) MemInfo() (freeBytes, totalBytes int64, err error) {
	if err := h.enter(opMemInfo); err != nil {
		return 0, 0, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cfg.TotalBytes - h.inUse, h.cfg.TotalBytes, nil
}

// Close unmaps whatever is still allocated.
func (h *HostSim) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var first error
	for ptr, mem := range h.allocs {
		if err := unix.Munmap(mem); err != nil && first == nil {
			first = fmt.Errorf("close: munmap %#x: %v: %w", uint64(ptr), err, ErrDriver)
		}
		delete(h.allocs, ptr)
		h.inUse -= int64(len(mem))
	}
	return first
}
