package tests

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestFaultScripts runs the fault scripts in testdata/faults: a manager or
// a GPU worker on a simulated device that traces its calls and injects the
// faults a script arms (traceDevice). Each file is a subtest, and so is
// each of its "subtest NAME ... subtest end" blocks. After every command
// the ledger, the backend's report and the device must agree (agrees);
// TestMain checks that no goroutine is left. Regenerate the expected
// output, then review its diff, with
//
//	go test ./tests -run TestFaultScripts -rewrite
//
// The command language (SIZE is bytes or a count of KiB, MiB, GiB: 4096,
// 3MiB; L names an allocation by its label). A script, or each of its
// subtests, starts with new-manager or new-worker:
//
//	new-manager [layout=pooled|discrete] [capacity=SIZE]
//	                     a manager on a fresh device (pooled by default)
//	build [plan=small]   BuildArena(testkit.SmallPlan("w")): hidden_states
//	                     1 MiB, logits 3 MiB, norm_unit_w 2 MiB, slab w 4 MiB
//	forward [step=write|noop|panic|goexit]
//	                     a forward step; write (the default) sets
//	                     hidden_states to 0x01 and copies the pattern to logits
//	carve slab=NAME bytes=SIZE
//	release
//	new-worker [capacity=SIZE]
//	                     a GPU worker with no budget on a fresh device
//	alloc owner=O label=L bytes=SIZE
//	alloc-batch owner=O labels=(L1, L2, ...) bytes=SIZE
//	free owner=O ptr=L
//	memset ptr=L value=N bytes=SIZE
//	copy-h2d ptr=L       copies the 4096-byte pattern
//	copy-d2h ptr=L bytes=SIZE
//	                     prints what it read (one repeated byte, the pattern)
//	copy-d2d dst=L src=L bytes=SIZE
//	probe                alloc 4096 B for owner probe, write, read back, free
//	mem-info             MemInfo
//	err                  Err: nil while it serves
//	ledger               only the calls and the ledger every command prints
//	close                Close (a worker's StopContext)
//	fault OP [nth=N] [kind=fail|panic|goexit|delay] [delay=D]
//	                     the N-th call (1 by default) of OP from this line
//	                     on fails (an alloc with ErrOutOfMemory, any other
//	                     call with ErrInjected, never reaching the device),
//	                     panics, calls runtime.Goexit or is delayed by D. OP
//	                     is alloc, free, memset, copy-h2d, copy-d2h,
//	                     copy-d2d, mem-info or copy (the three copies).
//	                     Two faults hitting one call: the first armed acts.
//	slow delay=D         every call from this line on is delayed by D
//
// A command prints its result — "ok[: detail]", or "error CLASS: text":
// CLASS names every exported sentinel the error is (errors.Is), the text
// has device pointers masked, and an out-of-memory error adds what it says
// was asked — then every backend call it made ("call OP SIZE: ok", the
// call's error class, or "injected KIND"), whether it waited for the
// delayed ones, and the ledger by owner beside the device's bytes in use.
// fault and slow print only what they armed.
//
// Faults are keyed by operation and by the count of that operation's calls
// from the line that arms them, never by a call number counted from the
// device's start: a driver call added to the build (another mem-info, say)
// adds one trace line to the scripts and moves no fault.
func TestFaultScripts(t *testing.T) {
	scripts, err := filepath.Glob("testdata/faults/*.txt")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no fault scripts in testdata/faults (%v)", err)
	}
	for _, path := range scripts {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			r := &scriptRig{}
			datadriven.RunTest(t, path, r.run)
		})
	}
}
