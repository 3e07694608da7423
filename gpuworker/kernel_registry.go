package gpuworker

import (
	"fmt"
	"math"
	"sort"
	"sync"
	"unsafe"

	"github.com/gpuarena/gpuarena/device"
)

// HostKernel is a kernel of the simulated device: a Go function that does
// what the CUDA kernel of the same name does, for the whole grid at once,
// on the simulated device's memory. It reads its arguments from l and its
// memory through l.Bytes or l.BF16, which check every range against the
// device's allocations; it returns the error they return (a kernel that
// reads or writes outside an allocation faults the device, as
// CUDA_ERROR_ILLEGAL_ADDRESS does), or one wrapping ErrLaunchConfig for a
// launch its contract refuses.
type HostKernel func(l *HostLaunch) error

// HostLaunch is one launch of a HostKernel: its configuration (no zero
// dimension) and arguments, one 8-byte word per kernel parameter, as the
// step passed them to device.Device.Launch.
type HostLaunch struct {
	Config device.LaunchConfig
	Args   []uint64
	sim    *HostSim
}

// Ptr is argument i as a device pointer.
func (l *HostLaunch) Ptr(i int) device.DevicePtr { return device.DevicePtr(l.Args[i]) }

// U32 is argument i as an unsigned 32-bit integer.
func (l *HostLaunch) U32(i int) uint32 { return uint32(l.Args[i]) }

// U64 is argument i as an unsigned 64-bit integer.
func (l *HostLaunch) U64(i int) uint64 { return l.Args[i] }

// F32 is argument i as a 32-bit float.
func (l *HostLaunch) F32(i int) float32 { return math.Float32frombits(uint32(l.Args[i])) }

// Bytes is the n bytes of device memory at ptr. Errors: ErrDeviceFault
// when they are not inside one allocation (an illegal address).
func (l *HostLaunch) Bytes(ptr device.DevicePtr, n int64) ([]byte, error) {
	b, err := l.sim.span(ptr, n)
	if err != nil {
		return nil, fmt.Errorf("%w: an illegal address (as CUDA_ERROR_ILLEGAL_ADDRESS): %w", ErrDeviceFault, err)
	}
	return b, nil
}

// BF16 is the n BF16 elements (their raw bits) at ptr. Errors:
// ErrDeviceFault when they are not inside one allocation, or ptr is not
// 2-byte aligned (as CUDA_ERROR_MISALIGNED_ADDRESS).
func (l *HostLaunch) BF16(ptr device.DevicePtr, n int64) ([]uint16, error) {
	if ptr%2 != 0 {
		return nil, fmt.Errorf("%w: a misaligned address (as CUDA_ERROR_MISALIGNED_ADDRESS): BF16 at %#x", ErrDeviceFault, uint64(ptr))
	}
	if n < 0 || n > math.MaxInt64/2 {
		return nil, fmt.Errorf("%w: an illegal address (as CUDA_ERROR_ILLEGAL_ADDRESS): %d BF16 elements at %#x", ErrDeviceFault, n, uint64(ptr))
	}
	b, err := l.Bytes(ptr, 2*n)
	if err != nil || n == 0 {
		return nil, err
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), n), nil
}

// KernelRegistry maps kernel names, as a module's PTX .entry names them,
// to the HostKernels the simulated device runs for them. It is safe for
// concurrent use.
type KernelRegistry struct {
	mu      sync.RWMutex
	kernels map[string]HostKernel
}

// NewKernelRegistry returns an empty registry.
func NewKernelRegistry() *KernelRegistry {
	return &KernelRegistry{kernels: map[string]HostKernel{}}
}

// DefaultKernels is the registry a simulated device uses unless its
// HostSimConfig names another. Package kernels registers gpuarena's own
// kernels in it.
var DefaultKernels = NewKernelRegistry()

// RegisterKernel registers k as the simulated device's kernel name in
// DefaultKernels (see KernelRegistry.Register).
func RegisterKernel(name string, k HostKernel) { DefaultKernels.Register(name, k) }

// Register registers k under name; a module loaded afterwards maps its
// .entry name to k. It panics on an empty name, a nil kernel or a name
// registered already: registration happens in init functions, where the
// mistake is the program's.
func (r *KernelRegistry) Register(name string, k HostKernel) {
	if name == "" || k == nil {
		panic(fmt.Sprintf("gpuworker: RegisterKernel(%q): a kernel needs a name and a function", name))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.kernels[name]; dup {
		panic(fmt.Sprintf("gpuworker: RegisterKernel(%q): a kernel of that name is registered already", name))
	}
	r.kernels[name] = k
}

// Lookup returns the kernel registered under name.
func (r *KernelRegistry) Lookup(name string) (HostKernel, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	k, ok := r.kernels[name]
	return k, ok
}

// Names returns the registered names, sorted.
func (r *KernelRegistry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.kernels))
	for n := range r.kernels {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
