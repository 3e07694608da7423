package node

import (
	"errors"
	"fmt"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/nodepb"
)

// Sentinels of the refusals a node answers; a *RemoteError wraps the one of
// its code, so a caller tests errors.Is(err, ErrNotFound) on any host.
var (
	// ErrUnknownDevice: a device index the node does not have.
	ErrUnknownDevice = errors.New("unknown device")
	// ErrNotFound: no reservation or deployment has the key (never made,
	// released, or its lease lapsed).
	ErrNotFound = errors.New("no reservation or deployment with that key")
	// ErrKeyConflict: the key names a reservation made with other
	// arguments (another device, size or label), a deployment built with
	// other arguments or loaded from another folder, or, for a build, a
	// reservation (and for a reserve, a deployment).
	ErrKeyConflict = errors.New("key already used (by a reservation or a deployment) with other arguments")
	// ErrUnknownMessage: a message type the gateway does not take.
	ErrUnknownMessage = errors.New("message type not taken by the node gateway")
	// ErrBusy: the node is answering as many requests of the kind as it
	// takes at once (MaxPlacementCalls); ask again later.
	ErrBusy = errors.New("node busy")
	// ErrDeviceInUse: a build named a device that holds anything (a
	// reservation, a deployment, other owners' bytes, or a deployment
	// whose release failed part-way, until it is released again), or a
	// reserve named a deployment's device.
	ErrDeviceInUse = errors.New("device in use")
	// ErrInternal: a failure without a code of its own.
	ErrInternal = errors.New("node internal error")
)

// RemoteError is a refusal as a node's gateway answered it: its code and
// message, and for ERROR_CODE_OUT_OF_MEMORY the bytes asked and those the
// budget had left. errors.Is matches the sentinel of its code:
// gpuarena.ErrOutOfMemory, gpuarena.ErrInvalidValue, gpuarena.ErrClosed,
// ErrUnknownDevice, ErrNotFound, ErrKeyConflict, ErrUnknownMessage,
// ErrBusy, ErrDeviceInUse or ErrInternal.
type RemoteError struct {
	// Address is the node that answered ("host:port").
	Address string
	// Code is the refusal's kind.
	Code nodepb.ErrorCode
	// Message is the node's own message.
	Message string
	// RequestedBytes and AvailableBytes are set for out-of-memory: the
	// bytes asked and the bytes the device's budget had left.
	RequestedBytes, AvailableBytes int64
}

// Error says which node refused and why.
func (e *RemoteError) Error() string {
	return fmt.Sprintf("node %s: %s", e.Address, e.Message)
}

// Unwrap returns the sentinel of the code.
func (e *RemoteError) Unwrap() error { return codeSentinel(e.Code) }

// codeSentinels are the codes with a Go error of their own, in the order
// wireError tries them: gpuarena.ErrInvalidValue last, since a refusal of
// another kind may wrap it too.
var codeSentinels = []struct {
	code nodepb.ErrorCode
	err  error
}{
	{nodepb.ErrorCode_ERROR_CODE_OUT_OF_MEMORY, gpuarena.ErrOutOfMemory},
	{nodepb.ErrorCode_ERROR_CODE_UNKNOWN_DEVICE, ErrUnknownDevice},
	{nodepb.ErrorCode_ERROR_CODE_NOT_FOUND, ErrNotFound},
	{nodepb.ErrorCode_ERROR_CODE_KEY_CONFLICT, ErrKeyConflict},
	{nodepb.ErrorCode_ERROR_CODE_CLOSED, gpuarena.ErrClosed},
	{nodepb.ErrorCode_ERROR_CODE_UNKNOWN_MESSAGE, ErrUnknownMessage},
	{nodepb.ErrorCode_ERROR_CODE_BUSY, ErrBusy},
	{nodepb.ErrorCode_ERROR_CODE_DEVICE_IN_USE, ErrDeviceInUse},
	{nodepb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, gpuarena.ErrInvalidValue},
}

// codeSentinel is the Go error a code stands for: ErrInternal for a code
// without one of its own.
func codeSentinel(c nodepb.ErrorCode) error {
	for _, cs := range codeSentinels {
		if cs.code == c {
			return cs.err
		}
	}
	return ErrInternal
}

// wireError is err as the gateway answers it: the code of the first
// sentinel of codeSentinels err matches (ERROR_CODE_INTERNAL for none),
// its message, and an out-of-memory error's bytes.
func wireError(err error) *nodepb.Error {
	if err == nil {
		return nil
	}
	w := &nodepb.Error{Code: nodepb.ErrorCode_ERROR_CODE_INTERNAL, Message: err.Error()}
	for _, cs := range codeSentinels {
		if errors.Is(err, cs.err) {
			w.Code = cs.code
			break
		}
	}
	var oom *gpuworker.OutOfMemoryError
	if errors.As(err, &oom) {
		w.RequestedBytes = oom.Bytes
		w.AvailableBytes = max(oom.Bytes-oom.ShortfallBytes, 0)
	}
	return w
}

// remoteError is w from the node at address as a Go error; nil for nil.
func remoteError(address string, w *nodepb.Error) error {
	if w == nil {
		return nil
	}
	return &RemoteError{Address: address, Code: w.Code, Message: w.Message,
		RequestedBytes: w.RequestedBytes, AvailableBytes: w.AvailableBytes}
}
