package device

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Sentinels of kernel modules and launches, the same on every backend;
// package gpuworker and the module root re-export them. Each comes inside
// a *KernelError that names the module and function.
var (
	// ErrBadModule: the driver (or the simulated device) refused a module
	// image: PTX that does not compile, a cubin for another architecture,
	// bytes that are neither (CUDA_ERROR_INVALID_PTX, _INVALID_IMAGE,
	// _NO_BINARY_FOR_GPU, _UNSUPPORTED_PTX_VERSION).
	ErrBadModule = errors.New("module image refused")
	// ErrNoFunction: the module has no kernel of that name
	// (CUDA_ERROR_NOT_FOUND), or, on the simulated device, no Go kernel is
	// registered under it.
	ErrNoFunction = errors.New("no such kernel in the module")
	// ErrNoModule: no module of that name is loaded (never loaded, or
	// unloaded since the Function was looked up).
	ErrNoModule = errors.New("module not loaded")
	// ErrLaunchConfig: the device refused a launch's configuration or
	// arguments: a grid or block dimension of 0 or past the device's limits,
	// more than 1024 threads per block, more shared memory than a block may
	// have, or more registers than the block leaves
	// (CUDA_ERROR_INVALID_VALUE, _LAUNCH_OUT_OF_RESOURCES from
	// cuLaunchKernel); an argument count that is not the kernel's.
	ErrLaunchConfig = errors.New("launch configuration refused")
)

// KernelError is the error of a module load, a function lookup or a
// launch: what was asked (Op), of which module and function, and why.
// errors.Is(err, Err) holds, and so does errors.Is for what Err wraps.
type KernelError struct {
	// Op is "load module", "unload module", "function" or "launch".
	Op string
	// Module is the module's name as loaded; Function the kernel's name
	// (empty for a load or unload).
	Module, Function string
	// Err is the sentinel (ErrBadModule, ErrNoFunction, ErrNoModule,
	// ErrLaunchConfig, or a backend's such as gpuworker.ErrDeviceFault)
	// wrapped with the details.
	Err error
}

// Error says what was asked of which module and function, and why.
func (e *KernelError) Error() string {
	if e.Function == "" {
		return fmt.Sprintf("%s %q: %v", e.Op, e.Module, e.Err)
	}
	return fmt.Sprintf("%s %s of module %q: %v", e.Op, e.Function, e.Module, e.Err)
}

// Unwrap returns Err.
func (e *KernelError) Unwrap() error { return e.Err }

// Dim3 is a grid's size in blocks or a block's in threads, per dimension.
type Dim3 struct {
	X, Y, Z uint32
}

// LaunchConfig is how a kernel is launched (cuLaunchKernel's gridDim,
// blockDim and sharedMemBytes). A zero Y or Z counts as 1, so Dim3{X: n}
// is a one-dimensional grid or block.
type LaunchConfig struct {
	// Grid is the grid's size in blocks; Block the block's in threads.
	Grid, Block Dim3
	// SharedBytes is the dynamic shared memory per block, in bytes.
	SharedBytes uint32
}

// Normalized returns c with a zero Y or Z of Grid and Block set to 1.
func (c LaunchConfig) Normalized() LaunchConfig {
	one := func(d *Dim3) {
		if d.Y == 0 {
			d.Y = 1
		}
		if d.Z == 0 {
			d.Z = 1
		}
	}
	one(&c.Grid)
	one(&c.Block)
	return c
}

// Module is a kernel module loaded onto the device by
// gpuarena.Manager.LoadModule: its name and the kernels it holds. It is a
// plain value; the manager's ledger, not this value, says whether it is
// still loaded.
type Module struct {
	// Name is the name it was loaded under, unique among the loaded modules.
	Name string `json:"name"`
	// Format is "ptx" (text, compiled by the driver for the device when
	// loaded) or "cubin" (an ELF of device code).
	Format string `json:"format"`
	// ImageBytes is the size of the image it was loaded from, in bytes.
	ImageBytes int64 `json:"image_bytes"`
	// Functions are the kernels a step may launch, in the image's order.
	Functions []Function `json:"functions"`
	// Unrunnable are the image's kernels this backend cannot run, with why
	// (the simulated device runs a kernel only when a Go kernel is
	// registered under its name); Function reports them as ErrNoFunction.
	Unrunnable map[string]string `json:"unrunnable,omitempty"`
}

// Function returns the module's kernel name. Errors: a *KernelError with
// ErrNoFunction naming the module and the function, and why when the
// backend said.
func (m *Module) Function(name string) (Function, error) {
	for _, f := range m.Functions {
		if f.Name == name {
			return f, nil
		}
	}
	err := fmt.Errorf("%w (the module has %d: %v)", ErrNoFunction, len(m.Functions), m.functionNames())
	if why, ok := m.Unrunnable[name]; ok {
		err = fmt.Errorf("%w: %s", ErrNoFunction, why)
	}
	return Function{}, &KernelError{Op: "function", Module: m.Name, Function: name, Err: err}
}

func (m *Module) functionNames() []string {
	out := make([]string, len(m.Functions))
	for i, f := range m.Functions {
		out[i] = f.Name
	}
	return out
}

// Function is a kernel of a loaded module, which Device.Launch launches.
// It stays valid until its module is unloaded or the manager closes.
type Function struct {
	// Module and Name name the kernel (the PTX .entry name).
	Module string `json:"module"`
	Name   string `json:"name"`
	// ParamBytes are the sizes of the kernel's parameters in bytes, in
	// order, read from the PTX .entry; nil when the image does not say (a
	// cubin), in which case Launch cannot check the argument count.
	ParamBytes []int `json:"param_bytes"`
	// Handle identifies the kernel to the GPU worker that loaded it; it
	// means nothing elsewhere.
	Handle uint64 `json:"-"`
}

// Event is a point in a step's stream, recorded by Device.RecordEvent and
// valid until the step returns.
type Event struct {
	// Handle identifies the event to its step; it means nothing elsewhere.
	Handle uint64
}

// ModuleEntry is a loaded module as the ledger lists it. Modules are not
// allocations: their bytes are not in the ledger's counters.
type ModuleEntry struct {
	// Name, Format and ImageBytes are the Module's.
	Name       string `json:"name"`
	Format     string `json:"format"`
	ImageBytes int64  `json:"image_bytes"`
	// Functions is how many kernels a step may launch from it.
	Functions int `json:"functions"`
	// DeviceBytes is what the module holds on the device (code, constant
	// banks, globals) where the driver reports it; CUDA's does not, so it
	// is 0 there, and on the simulated device, which holds none.
	DeviceBytes int64 `json:"device_bytes"`
	// Loaded is when it was loaded.
	Loaded time.Time `json:"loaded"`
}

// Kernel arguments are 8-byte words, one per parameter, in the kernel's
// order (cuLaunchKernel reads each parameter's size from the kernel, so a
// 4-byte parameter reads the word's low half: words are little-endian, as
// every CUDA host is). These make them.

// PtrArg is a device pointer argument (a T* parameter).
func PtrArg(p DevicePtr) uint64 { return uint64(p) }

// U32Arg is an unsigned 32-bit argument (unsigned int).
func U32Arg(v uint32) uint64 { return uint64(v) }

// I32Arg is a signed 32-bit argument (int).
func I32Arg(v int32) uint64 { return uint64(uint32(v)) }

// U64Arg is an unsigned 64-bit argument (unsigned long long, size_t).
func U64Arg(v uint64) uint64 { return v }

// F32Arg is a 32-bit float argument (float).
func F32Arg(v float32) uint64 { return uint64(math.Float32bits(v)) }
