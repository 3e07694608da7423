package gpuarena

import (
	"context"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// Errors of kernel modules and launches, re-exported (see package device
// and gpuworker).
var (
	// ErrBadModule: LoadModule's image was refused (it does not parse, or
	// the driver's JIT rejected it; the error carries its log).
	ErrBadModule = gpuworker.ErrBadModule
	// ErrNoFunction: a kernel the module does not have (or, on hostsim,
	// one no Go kernel is registered for).
	ErrNoFunction = gpuworker.ErrNoFunction
	// ErrNoModule: a module not loaded (never, or unloaded since).
	ErrNoModule = gpuworker.ErrNoModule
	// ErrLaunchConfig: a launch configuration or argument count the
	// device refused.
	ErrLaunchConfig = gpuworker.ErrLaunchConfig
	// ErrNoCompute: the backend runs no kernels.
	ErrNoCompute = gpuworker.ErrNoCompute
	// ErrDeviceFault: a kernel faulted; the manager is fatal (Err), every
	// later request gets it, and Close still returns.
	ErrDeviceFault = gpuworker.ErrDeviceFault
)

// LoadModule loads a kernel module onto the device, on the GPU thread,
// under name: image is PTX text (the driver compiles it for the device
// when it loads it, cuModuleLoadData) or a cubin. It returns the module
// with every kernel it declares (device.Module.Function looks one up),
// which forward steps launch with device.Device.Launch. On the simulated
// device a kernel runs when a Go kernel is registered under its .entry
// name (gpuworker.RegisterKernel; package kernels registers gpuarena's
// own), so the same PTX and step code run on both backends.
//
// The manager owns the module: it stays loaded until UnloadModule or
// Close. Release does not unload it, since a module is code, not memory
// the arena owns: a server that rebuilds its arena keeps its kernels. The
// ledger lists it (device.Ledger.Modules), outside its byte counters (the
// driver does not report a module's device footprint).
//
// Errors, each a *device.KernelError naming the module: ErrBadModule,
// ErrInvalidValue (an empty name, or one loaded already), ErrNoCompute,
// ErrDeviceFault, ErrClosed, ErrReentrant, the context's.
func (m *Manager) LoadModule(ctx context.Context, name string, image []byte) (*device.Module, error) {
	return m.worker.LoadModule(ctx, name, image)
}

// UnloadModule unloads the module name; launches of its functions then
// fail with ErrNoModule. Errors: ErrNoModule (a *device.KernelError) when
// none of that name is loaded, the driver's, ErrClosed, ErrReentrant, the
// context's.
func (m *Manager) UnloadModule(ctx context.Context, name string) error {
	return m.worker.UnloadModule(ctx, name)
}
