package messages

import (
	"context"

	"github.com/gpuarena/gpuarena/device"
)

// LoadModule asks the GPU actor to load a kernel module from Image (PTX
// text or a cubin) under Name, unique among the loaded modules. Reply:
// LoadModuleReply.
type LoadModule struct {
	Ctx   context.Context
	Name  string
	Image []byte
	Reply chan<- LoadModuleReply
}

// LoadModuleReply answers LoadModule: the module and its kernels, or a
// *device.KernelError (device.ErrBadModule, gpuworker.ErrNoCompute,
// gpuworker.ErrInvalidValue for an empty or taken name), or the context's
// error when it was done before the work started.
type LoadModuleReply struct {
	Module *device.Module
	Err    error
}

// UnloadModule asks the GPU actor to unload the module Name. Reply: the
// error, nil on success (a *device.KernelError with device.ErrNoModule
// when no module of that name is loaded).
type UnloadModule struct {
	Ctx   context.Context
	Name  string
	Reply chan<- error
}
