package tests

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// sentinels are the errors a script names an error by (errors.Is), in the
// order it lists them: the module root's exported sentinels, then the GPU
// worker's own that the root does not re-export.
var sentinels = []struct {
	name string
	err  error
}{
	{"ErrInvalidOption", gpuarena.ErrInvalidOption},
	{"ErrClosed", gpuarena.ErrClosed},
	{"ErrOutOfMemory", gpuarena.ErrOutOfMemory},
	{"ErrNoArena", gpuarena.ErrNoArena},
	{"ErrArenaBuilt", gpuarena.ErrArenaBuilt},
	{"ErrReleased", gpuarena.ErrReleased},
	{"ErrSlabAbsent", gpuarena.ErrSlabAbsent},
	{"ErrSlabExhausted", gpuarena.ErrSlabExhausted},
	{"ErrInvalidCarve", gpuarena.ErrInvalidCarve},
	{"ErrInvalidValue", gpuarena.ErrInvalidValue},
	{"ErrOutOfRange", gpuarena.ErrOutOfRange},
	{"ErrNotAllocated", gpuarena.ErrNotAllocated},
	{"ErrStepOver", gpuarena.ErrStepOver},
	{"ErrNotGPUThread", gpuarena.ErrNotGPUThread},
	{"ErrStepExited", gpuarena.ErrStepExited},
	{"ErrReentrant", gpuarena.ErrReentrant},
	{"ErrBackendNotBuiltIn", gpuarena.ErrBackendNotBuiltIn},
	{"ErrBackendPanic", gpuarena.ErrBackendPanic},
	{"ErrActorPanic", gpuarena.ErrActorPanic},
	{"ErrStepPanic", gpuarena.ErrStepPanic},
	{"ErrSupervisorPanic", gpuarena.ErrSupervisorPanic},
	{"ErrSupervisorStopped", gpuarena.ErrSupervisorStopped},
	{"ErrNotOwner", gpuworker.ErrNotOwner},
	{"ErrTagPanic", gpuworker.ErrTagPanic},
	{"ErrNoDevice", gpuworker.ErrNoDevice},
	{"ErrDriver", gpuworker.ErrDriver},
	{"ErrInjected", gpuworker.ErrInjected},
}

// errorClass names err by every sentinel it is (errors.Is), joined with
// "+", or "unclassified" when it is none of them.
func errorClass(err error) string {
	var names []string
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			names = append(names, s.name)
		}
	}
	if len(names) == 0 {
		return "unclassified"
	}
	return strings.Join(names, "+")
}

// pointerRE matches a device pointer in an error's text.
var pointerRE = regexp.MustCompile(`0x[0-9a-f]{6,}`)

// result is a command's result line: "ok" (with detail, if any), or the
// error's class, its text with any pointer masked, and, for an
// *gpuworker.OutOfMemoryError, what it says was asked.
func result(err error, detail string) string {
	if err == nil {
		if detail == "" {
			return "ok\n"
		}
		return "ok: " + detail + "\n"
	}
	s := fmt.Sprintf("error %s: %s\n", errorClass(err), pointerRE.ReplaceAllString(err.Error(), "0x…"))
	var oom *gpuworker.OutOfMemoryError
	if errors.As(err, &oom) {
		s += fmt.Sprintf("oom: owner %s, label %s, %s\n", oom.Owner, oom.Label, size(oom.Bytes))
	}
	return s
}

// size writes n bytes exactly, in the largest binary unit that divides it.
func size(n int64) string {
	switch {
	case n != 0 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n != 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n != 0 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// ledgerLine is the ledger by owner, sorted, and the device's bytes in use.
func ledgerLine(l device.Ledger, deviceBytes int64) string {
	by := l.BytesByOwner()
	owners := make([]string, 0, len(by))
	for o := range by {
		owners = append(owners, o)
	}
	slices.Sort(owners)
	parts := make([]string, len(owners))
	for i, o := range owners {
		parts[i] = o + " " + size(by[o])
	}
	held := "empty"
	if len(parts) > 0 {
		held = strings.Join(parts, ", ")
	}
	return fmt.Sprintf("ledger: %s; device: %s\n", held, size(deviceBytes))
}
