package tests

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/messages"
)

// workerOp is one operation of the GPU worker in the fault matrix. Before it
// runs, two 1 MiB allocations a and b are made for owner "o": alloc calls 1
// and 2, backend calls 1 and 2. The op's first backend call is call 3.
type workerOp struct {
	name string
	run  func(ctx context.Context, w *gpuworker.Worker, a, b messages.DevicePtr) error
	// heldOK is the bytes held after the op succeeded.
	heldOK int64
	// effect checks what a successful op did (nil: nothing more to check).
	effect func(t *testing.T, w *gpuworker.Worker, a, b messages.DevicePtr)
}

var pattern = bytes.Repeat([]byte("fault-matrix"), 4096/12+1)[:4096]

func workerOps() []workerOp {
	readback := func(t *testing.T, w *gpuworker.Worker, p messages.DevicePtr, want []byte) {
		t.Helper()
		got, err := w.CopyDtoH(context.Background(), p, int64(len(want)))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("readback at %#x: %v, equal %v", uint64(p), err, bytes.Equal(got, want))
		}
	}
	return []workerOp{
		{name: "alloc", heldOK: 3 * mib,
			run: func(ctx context.Context, w *gpuworker.Worker, _, _ messages.DevicePtr) error {
				_, err := w.Alloc(ctx, "o", "c", mib)
				return err
			}},
		{name: "batch alloc", heldOK: 5 * mib,
			run: func(ctx context.Context, w *gpuworker.Worker, _, _ messages.DevicePtr) error {
				_, _, err := w.AllocBatch(ctx, "o", []messages.AllocItem{{Label: "c1", Bytes: mib}, {Label: "c2", Bytes: mib}, {Label: "c3", Bytes: mib}}, nil)
				return err
			}},
		{name: "free", heldOK: 1 * mib,
			run: func(ctx context.Context, w *gpuworker.Worker, a, _ messages.DevicePtr) error {
				return w.Free(ctx, "o", a)
			}},
		{name: "memset", heldOK: 2 * mib,
			run: func(ctx context.Context, w *gpuworker.Worker, a, _ messages.DevicePtr) error {
				return w.Memset(ctx, a, 0x5A, 4096)
			},
			effect: func(t *testing.T, w *gpuworker.Worker, a, _ messages.DevicePtr) {
				readback(t, w, a, bytes.Repeat([]byte{0x5A}, 4096))
			}},
		{name: "copy host→device", heldOK: 2 * mib,
			run: func(ctx context.Context, w *gpuworker.Worker, a, _ messages.DevicePtr) error {
				return w.CopyHtoD(ctx, a, pattern)
			},
			effect: func(t *testing.T, w *gpuworker.Worker, a, _ messages.DevicePtr) { readback(t, w, a, pattern) }},
		{name: "copy device→host", heldOK: 2 * mib,
			run: func(ctx context.Context, w *gpuworker.Worker, a, _ messages.DevicePtr) error {
				got, err := w.CopyDtoH(ctx, a, 4096)
				if err == nil && !bytes.Equal(got, make([]byte, 4096)) {
					err = errors.New("a fresh allocation did not read back as zeros")
				}
				return err
			}},
		{name: "copy device→device", heldOK: 2 * mib,
			run: func(ctx context.Context, w *gpuworker.Worker, a, b messages.DevicePtr) error {
				return w.CopyDtoD(ctx, b, a, mib)
			},
			effect: func(t *testing.T, w *gpuworker.Worker, _, b messages.DevicePtr) {
				readback(t, w, b, make([]byte, 4096))
			}},
	}
}

// workerFault is one fault of the matrix, for the ops it can hit.
type workerFault struct {
	name   string
	faults func(op string) (gpuworker.Faults, bool) // false: it cannot hit op
	want   error                                    // nil: the op succeeds
	// held is the bytes held after the op failed (ignored when want is nil).
	held func(op workerOp) int64
}

func workerFaults() []workerFault {
	return []workerFault{
		{name: "out of memory at the op's first allocation", want: gpuworker.ErrOutOfMemory,
			faults: func(op string) (gpuworker.Faults, bool) {
				return gpuworker.Faults{FailAllocAt: 3}, op == "alloc" || op == "batch alloc"
			},
			held: func(workerOp) int64 { return 2 * mib }},
		{name: "out of memory at the second item", want: gpuworker.ErrOutOfMemory,
			faults: func(op string) (gpuworker.Faults, bool) { return gpuworker.Faults{FailAllocAt: 4}, op == "batch alloc" },
			held:   func(workerOp) int64 { return 2 * mib }},
		{name: "out of memory, and the rollback's free fails", want: gpuworker.ErrOutOfMemory,
			faults: func(op string) (gpuworker.Faults, bool) {
				return gpuworker.Faults{FailAllocAt: 4, FailFreeAt: 1}, op == "batch alloc"
			},
			held: func(workerOp) int64 { return 3 * mib }}, // the first item stays, in the ledger and on the device
		{name: "failing free", want: gpuworker.ErrInjected,
			faults: func(op string) (gpuworker.Faults, bool) { return gpuworker.Faults{FailFreeAt: 1}, op == "free" },
			held:   func(workerOp) int64 { return 2 * mib }},
		{name: "failing memset", want: gpuworker.ErrInjected,
			faults: func(op string) (gpuworker.Faults, bool) { return gpuworker.Faults{FailMemsetAt: 1}, op == "memset" },
			held:   func(workerOp) int64 { return 2 * mib }},
		{name: "failing copy", want: gpuworker.ErrInjected,
			faults: func(op string) (gpuworker.Faults, bool) {
				return gpuworker.Faults{FailCopyAt: 1}, strings.HasPrefix(op, "copy")
			},
			held: func(workerOp) int64 { return 2 * mib }},
		{name: "slow device", want: nil,
			faults: func(string) (gpuworker.Faults, bool) { return gpuworker.Faults{Delay: 2 * time.Millisecond}, true }},
		{name: "backend panic in the op's first call", want: gpuworker.ErrBackendPanic,
			faults: func(string) (gpuworker.Faults, bool) { return gpuworker.Faults{PanicAt: 3}, true },
			held:   func(workerOp) int64 { return 2 * mib }},
		{name: "backend panic at the second item", want: gpuworker.ErrBackendPanic,
			faults: func(op string) (gpuworker.Faults, bool) { return gpuworker.Faults{PanicAt: 4}, op == "batch alloc" },
			held:   func(workerOp) int64 { return 2 * mib }}, // the rollback freed the first item
	}
}

// The fault matrix of the GPU worker's own operations: every fault a plan
// (gpuworker.WithFaults on the simulated device) injects, in every operation
// it can hit. A fault of a kind
// the operation never calls cannot hit it and has no cell: out of memory
// (an Alloc) in free, memset and copy; a failing free in alloc, memset and
// copy (a batch's rollback frees, so it has one); a failing memset or copy
// outside memset and copy. The manager's operations are in
// faults_manager_test.go. Each cell checks
// the typed error, that the ledger equals the device's bytes in use, that the
// worker keeps serving (or, after a backend panic, reports the fatal error
// and still frees everything when it stops), and, through TestMain, that no
// goroutine is left.
func TestWorkerFaultMatrix(t *testing.T) {
	cells := 0
	for _, op := range workerOps() {
		for _, f := range workerFaults() {
			plan, ok := f.faults(op.name)
			if !ok {
				continue
			}
			cells++
			t.Run(op.name+"/"+f.name, func(t *testing.T) { runWorkerCell(t, op, f, plan) })
		}
	}
	// slow and panic: every op (14); out of memory: alloc, batch (2 + 2);
	// failing free, memset, copy: 1 + 1 + 3; panic at the second item: 1.
	if cells != 24 {
		t.Fatalf("%d cells, want 24", cells)
	}
}

func runWorkerCell(t *testing.T, op workerOp, f workerFault, plan gpuworker.Faults) {
	ctx := context.Background()
	sim := newSim(t, gpuworker.HostSimConfig{})
	w := simWorker(t, gpuworker.WithFaults(sim, plan))
	a, err := w.Alloc(ctx, "o", "a", mib)
	if err != nil {
		t.Fatal(err)
	}
	b, err := w.Alloc(ctx, "o", "b", mib)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = op.run(ctx, w, a, b)
	took := time.Since(start)

	switch {
	case f.want == nil && err != nil:
		t.Fatalf("%s on a %s: %v, want success", op.name, f.name, err)
	case f.want != nil && !errors.Is(err, f.want):
		t.Fatalf("%s: %v, want %v", op.name, err, f.want)
	}
	want := op.heldOK
	if f.want != nil {
		want = f.held(op)
	}
	if l := agrees(t, w, sim); l.Counters.CurrentBytes != want {
		t.Fatalf("after %s: ledger holds %d B, want %d B", op.name, l.Counters.CurrentBytes, want)
	}
	if f.want == nil && plan.Delay > 0 && took < plan.Delay {
		t.Fatalf("%s took %v on a device slowed by %v per call", op.name, took, plan.Delay)
	}
	if errors.Is(f.want, gpuworker.ErrOutOfMemory) {
		var oom *gpuworker.OutOfMemoryError
		if !errors.As(err, &oom) || oom.Owner != "o" || oom.Bytes != mib || !strings.HasPrefix(oom.Label, "c") {
			t.Fatalf("OOM error %v: want an *OutOfMemoryError naming owner o, 1 MiB and the item", err)
		}
	}

	if errors.Is(f.want, gpuworker.ErrBackendPanic) {
		if !errors.Is(w.Err(), gpuworker.ErrBackendPanic) {
			t.Fatalf("Err() = %v after a backend panic, want ErrBackendPanic", w.Err())
		}
		if _, err := w.Alloc(ctx, "o", "after", mib); !errors.Is(err, gpuworker.ErrBackendPanic) {
			t.Fatalf("alloc after a backend panic: %v, want ErrBackendPanic", err)
		}
	} else {
		if w.Err() != nil {
			t.Fatalf("Err() = %v, want nil", w.Err())
		}
		if f.want == nil && op.effect != nil {
			op.effect(t, w, a, b)
		}
		if errors.Is(f.want, gpuworker.ErrInjected) && op.name != "free" {
			// A failed memset or copy wrote nothing: a still reads as zeros.
			if got, err := w.CopyDtoH(ctx, a, 4096); err != nil || !bytes.Equal(got, make([]byte, 4096)) {
				t.Fatalf("after a failed %s, a reads back changed (%v)", op.name, err)
			}
		}
		// Still serving: a new allocation, written and read back, and freed.
		p, err := w.Alloc(ctx, "probe", "probe", 4096)
		if err != nil {
			t.Fatalf("alloc after the fault: %v", err)
		}
		if err := w.CopyHtoD(ctx, p, pattern); err != nil {
			t.Fatal(err)
		}
		if got, err := w.CopyDtoH(ctx, p, 4096); err != nil || !bytes.Equal(got, pattern) {
			t.Fatalf("readback after the fault: %v", err)
		}
		if err := w.Free(ctx, "probe", p); err != nil {
			t.Fatal(err)
		}
	}
	w.Stop()
	if sim.BytesInUse() != 0 {
		t.Fatalf("the device holds %d B after Stop, want 0", sim.BytesInUse())
	}
}
