package tests

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// scriptRig is the state one fault script (or one of its subtests) drives:
// a manager or a GPU worker on a traced simulated device.
type scriptRig struct {
	// t is the test (or subtest) that started the manager or worker; a
	// command from another one fails, so that every subtest starts afresh.
	t    *testing.T
	sim  *gpuworker.HostSim
	dev  *traceDevice
	m    *gpuarena.Manager           // set by new-manager
	w    *gpuworker.Worker           // set by new-worker
	ptrs map[string]device.DevicePtr // the worker's allocations, by label
}

// scriptCmd runs one command and returns its result lines.
type scriptCmd func(r *scriptRig, t *testing.T, td *datadriven.TestData) string

// scriptCmds are the commands that reach the manager or worker; their
// output is followed by the calls they made and the ledger. The commands
// fault and slow only arm the device and print what they armed.
var scriptCmds = map[string]scriptCmd{
	"new-manager": (*scriptRig).newManager,
	"build":       (*scriptRig).build,
	"forward":     (*scriptRig).forward,
	"carve":       (*scriptRig).carve,
	"release":     (*scriptRig).release,
	"new-worker":  (*scriptRig).newWorker,
	"alloc":       (*scriptRig).alloc,
	"alloc-batch": (*scriptRig).allocBatch,
	"free":        (*scriptRig).free,
	"memset":      (*scriptRig).memset,
	"copy-h2d":    (*scriptRig).copyHtoD,
	"copy-d2h":    (*scriptRig).copyDtoH,
	"copy-d2d":    (*scriptRig).copyDtoD,
	"probe":       (*scriptRig).probe,
	"mem-info":    (*scriptRig).memInfo,
	"err":         (*scriptRig).errCmd,
	"ledger":      func(*scriptRig, *testing.T, *datadriven.TestData) string { return "" },
	"close":       (*scriptRig).close,
}

// run runs one directive of a script.
func (r *scriptRig) run(t *testing.T, td *datadriven.TestData) string {
	switch td.Cmd {
	case "fault":
		r.mustBeStarted(t, td)
		return r.fault(t, td)
	case "slow":
		r.mustBeStarted(t, td)
		d := durationArg(t, td, "delay")
		r.dev.setSlow(d)
		return fmt.Sprintf("every call from here is delayed %v\n", d)
	}
	cmd, ok := scriptCmds[td.Cmd]
	if !ok {
		td.Fatalf(t, "unknown command %q", td.Cmd)
	}
	if td.Cmd != "new-manager" && td.Cmd != "new-worker" {
		r.mustBeStarted(t, td)
	}
	start := time.Now()
	out := cmd(r, t, td)
	took := time.Since(start)
	return out + r.callsAndLedger(t, took)
}

// mustBeStarted fails the test unless this (sub)test started a manager or
// a worker.
func (r *scriptRig) mustBeStarted(t *testing.T, td *datadriven.TestData) {
	if r.t != t {
		td.Fatalf(t, "%s before new-manager or new-worker in this test", td.Cmd)
	}
}

// callsAndLedger prints the calls the device saw since the last command
// and the ledger, checking that the ledger, the backend's report and the
// device agree (agrees) and that a command whose calls were delayed waited
// for them.
func (r *scriptRig) callsAndLedger(t *testing.T, took time.Duration) string {
	var b strings.Builder
	calls, slept, delayed := r.dev.take()
	for _, c := range calls {
		b.WriteString("call " + c + "\n")
	}
	if len(calls) == 0 {
		b.WriteString("no backend calls\n")
	}
	switch {
	case delayed > 0 && took < slept:
		fmt.Fprintf(&b, "delayed: %s, %v in all, yet the command took only %v\n", plural(delayed, "call"), slept, took)
	case delayed > 0:
		// No count: a call added to the command adds its own line only.
		b.WriteString("delayed: the command waited for its delayed calls\n")
	}
	var l ledgerer = r.w
	if r.m != nil {
		l = r.m
	}
	led, err := l.Ledger(context.Background())
	if err != nil {
		fmt.Fprintf(&b, "ledger: %s; device: %s\n", errorClass(err), size(r.sim.BytesInUse()))
		return b.String()
	}
	agrees(t, l, r.sim)
	b.WriteString(ledgerLine(led, r.sim.BytesInUse()))
	return b.String()
}

// start resets the rig for a new manager or worker on a traced simulated
// device of the capacity the directive says (capacity=SIZE; hostsim's
// default otherwise), for t.
func (r *scriptRig) start(t *testing.T, td *datadriven.TestData) gpuworker.Backend {
	cfg := gpuworker.HostSimConfig{}
	if td.HasArg("capacity") {
		cfg.TotalBytes = sizeArg(t, td, "capacity")
	}
	r.t, r.sim, r.m, r.w = t, newSim(t, cfg), nil, nil
	r.ptrs = make(map[string]device.DevicePtr)
	r.dev = newTraceDevice(r.sim)
	return r.dev
}

// fault arms a fault: fault OP [nth=N] [kind=fail|panic|goexit|delay]
// [delay=D]. OP is alloc, free, memset, copy-h2d, copy-d2h, copy-d2d,
// mem-info, or copy (the three copies alike).
func (r *scriptRig) fault(t *testing.T, td *datadriven.TestData) string {
	if len(td.CmdArgs) == 0 || len(td.CmdArgs[0].Vals) > 0 {
		td.Fatalf(t, "fault needs an operation first: fault OP [nth=N] [kind=K]")
	}
	op := td.CmdArgs[0].Key
	if op != "copy" && !slices.Contains(callOps, op) {
		td.Fatalf(t, "fault: unknown operation %q", op)
	}
	nth := 1
	td.MaybeScanArgs(t, "nth", &nth)
	kind := string(kindFail)
	td.MaybeScanArgs(t, "kind", &kind)
	var delay time.Duration
	switch faultKind(kind) {
	case kindFail, kindPanic, kindGoexit:
	case kindDelay:
		delay = durationArg(t, td, "delay")
	default:
		td.Fatalf(t, "fault: unknown kind %q", kind)
	}
	r.dev.arm(op, nth, faultKind(kind), delay)
	if delay > 0 {
		kind += " " + delay.String()
	}
	return fmt.Sprintf("armed: call %d of %s from here: %s\n", nth, op, kind)
}

// memInfo asks the manager or worker for the device's free and total memory.
func (r *scriptRig) memInfo(*testing.T, *datadriven.TestData) string {
	var free, total int64
	var err error
	if r.m != nil {
		free, total, err = r.m.MemInfo(context.Background())
	} else {
		free, total, err = r.w.MemInfo(context.Background())
	}
	return result(err, fmt.Sprintf("%s free of %s", size(free), size(total)))
}

// errCmd prints the manager's or worker's Err: nil while it serves.
func (r *scriptRig) errCmd(*testing.T, *datadriven.TestData) string {
	var err error
	if r.m != nil {
		err = r.m.Err()
	} else {
		err = r.w.Err()
	}
	if err != nil {
		return "err: " + errorClass(err) + "\n"
	}
	return "err: nil\n"
}

// close closes the manager or stops the worker.
func (r *scriptRig) close(*testing.T, *datadriven.TestData) string {
	if r.m != nil {
		return result(r.m.Close(), "")
	}
	return result(r.w.StopContext(context.Background()), "")
}

// sizeArg reads key=SIZE: bytes, or a count of B, KiB, MiB or GiB
// ("4096", "3MiB").
func sizeArg(t *testing.T, td *datadriven.TestData, key string) int64 {
	var s string
	td.ScanArgs(t, key, &s)
	n, err := parseSize(s)
	if err != nil {
		td.Fatalf(t, "%s=%s: %v", key, s, err)
	}
	return n
}

// parseSize reads a size written as sizeArg takes it.
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		shift  uint
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err == nil && (n < 0 || n > math.MaxInt64>>u.shift) {
				err = fmt.Errorf("size %s out of range", s)
			}
			return n << u.shift, err
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

// durationArg reads key=DURATION (time.ParseDuration).
func durationArg(t *testing.T, td *datadriven.TestData, key string) time.Duration {
	var s string
	td.ScanArgs(t, key, &s)
	d, err := time.ParseDuration(s)
	if err != nil {
		td.Fatalf(t, "%s=%s: %v", key, s, err)
	}
	return d
}

// plural is n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
