package gpuworker

import (
	"context"
	"errors"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// LoadModule loads a kernel module from image — PTX text (compiled for the
// device by the driver's JIT when loaded) or a cubin — under name, on the
// GPU thread (cuModuleLoadData), and looks up every kernel it declares
// (cuModuleGetFunction). The module stays loaded until UnloadModule or
// Stop; a release of the arena does not unload it. The ledger lists it
// (device.Ledger.Modules) outside its byte counters. Forward steps launch
// its kernels through device.Device.Launch.
//
// Errors, each a *device.KernelError naming the module: ErrBadModule (the
// image does not parse, or the driver refused it, with its JIT log),
// ErrNoCompute (the backend runs no kernels), ErrInvalidValue (an empty
// name, or one already loaded), ErrDeviceFault, ErrClosed, the context's.
func (w *Worker) LoadModule(ctx context.Context, name string, image []byte) (*device.Module, error) {
	r, err := moduleLoads.ask(ctx, w, messages.LoadModule{Ctx: ctx, Name: name, Image: image})
	return r.Module, errors.Join(err, r.Err)
}

// UnloadModule unloads the module name (cuModuleUnload); its Functions
// then fail to launch with ErrNoModule. Errors: a *device.KernelError with
// ErrNoModule when no module of that name is loaded; the backend's;
// ErrClosed; the context's.
func (w *Worker) UnloadModule(ctx context.Context, name string) error {
	r, err := moduleUnloads.ask(ctx, w, messages.UnloadModule{Ctx: ctx, Name: name})
	return errors.Join(err, r)
}
