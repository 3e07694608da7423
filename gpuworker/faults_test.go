package gpuworker_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena/gpuworker"
)

// newHostSim makes a simulated device or fails the test.
func newHostSim(t *testing.T) *gpuworker.HostSim {
	t.Helper()
	sim, err := gpuworker.NewHostSim(gpuworker.HostSimConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return sim
}

// Each planned failure hits its call of its kind, counted per kind (the
// three copies count alike), and never reaches the wrapped device.
func TestFaultsFailThePlannedCallOfEachKind(t *testing.T) {
	sim := newHostSim(t)
	f := gpuworker.WithFaults(sim, gpuworker.Faults{FailAllocAt: 2, FailFreeAt: 1, FailMemsetAt: 1, FailCopyAt: 2})
	p, err := f.Alloc(mib)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Alloc(mib); !errors.Is(err, gpuworker.ErrOutOfMemory) || sim.BytesInUse() != mib {
		t.Fatalf("second alloc: %v with %d B held; want ErrOutOfMemory and the first MiB only", err, sim.BytesInUse())
	}
	if err := f.Free(p); !errors.Is(err, gpuworker.ErrInjected) || sim.BytesInUse() != mib {
		t.Fatalf("first free: %v with %d B held; want ErrInjected and the allocation kept", err, sim.BytesInUse())
	}
	if err := f.Memset(p, 7, mib); !errors.Is(err, gpuworker.ErrInjected) {
		t.Fatalf("first memset: %v, want ErrInjected", err)
	}
	if err := f.CopyHtoD(p, []byte{1}); err != nil {
		t.Fatalf("first copy: %v", err)
	}
	got := make([]byte, 2)
	if err := f.CopyDtoH(got, p); !errors.Is(err, gpuworker.ErrInjected) {
		t.Fatalf("second copy: %v, want ErrInjected", err)
	}
	if err := f.CopyDtoD(p+1, p, 1); err != nil {
		t.Fatalf("third copy: %v", err)
	}
	got = make([]byte, 3)
	if err := sim.CopyDtoH(got, p); err != nil || !slices.Equal(got, []byte{1, 1, 0}) {
		t.Fatalf("device bytes %v, %v; want [1 1 0]: the copies wrote, the failed memset did not", got, err)
	}
	if err := f.Free(p); err != nil || sim.BytesInUse() != 0 {
		t.Fatalf("second free: %v with %d B held; want nil and 0", err, sim.BytesInUse())
	}
	if f.Info() != sim.Info() {
		t.Fatalf("Info %+v, want the wrapped device's %+v", f.Info(), sim.Info())
	}
}

// OnCall sees every call, with its operation and number among all calls,
// before PanicAt panics at its call; Delay slows every call.
func TestFaultsRunOnCallThenPanicAt(t *testing.T) {
	var seen []string
	f := gpuworker.WithFaults(newHostSim(t), gpuworker.Faults{
		PanicAt: 3,
		OnCall:  func(op string, call int) { seen = append(seen, fmt.Sprintf("%s %d", op, call)) },
	})
	if _, _, err := f.MemInfo(); err != nil {
		t.Fatal(err)
	}
	p, err := f.Alloc(mib)
	if err != nil {
		t.Fatal(err)
	}
	panicked := func() (r any) {
		defer func() { r = recover() }()
		_ = f.Memset(p, 0, mib)
		return nil
	}()
	if msg, _ := panicked.(string); !strings.Contains(msg, "injected panic in memset (call 3)") {
		t.Fatalf("third call panicked with %v, want the injected panic naming memset, call 3", panicked)
	}
	if want := []string{"mem info 1", "alloc 2", "memset 3"}; !slices.Equal(seen, want) {
		t.Fatalf("OnCall saw %v, want %v", seen, want)
	}

	slow := gpuworker.WithFaults(newHostSim(t), gpuworker.Faults{Delay: 2 * time.Millisecond})
	start := time.Now()
	if _, _, err := slow.MemInfo(); err != nil || time.Since(start) < 2*time.Millisecond {
		t.Fatalf("MemInfo on a slowed device: %v after %v, want success after at least 2ms", err, time.Since(start))
	}
}

// binderBackend is a backend with per-thread state (ThreadBinder) and no
// bytes-in-use report.
type binderBackend struct {
	gpuworker.Backend
	binds int
}

func (b *binderBackend) BindThread() error { b.binds++; return nil }

// The wrapper has the optional interfaces the wrapped backend has, and only
// those, and passes their calls through.
func TestFaultsKeepTheOptionalInterfaces(t *testing.T) {
	sim := newHostSim(t)
	binder := &binderBackend{Backend: struct{ gpuworker.Backend }{sim}}
	both := struct {
		*gpuworker.HostSim
		gpuworker.ThreadBinder
	}{sim, binder}
	for _, c := range []struct {
		name           string
		b              gpuworker.Backend
		reports, binds bool
	}{
		{"hostsim", sim, true, false},
		{"binder", binder, false, true},
		{"both", both, true, true},
		{"plain", struct{ gpuworker.Backend }{sim}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := gpuworker.WithFaults(c.b, gpuworker.Faults{})
			r, reports := f.(gpuworker.BytesInUseReporter)
			tb, binds := f.(gpuworker.ThreadBinder)
			if reports != c.reports || binds != c.binds {
				t.Fatalf("wrapper reports bytes %v, binds threads %v; want %v, %v", reports, binds, c.reports, c.binds)
			}
			if reports && r.BytesInUse() != sim.BytesInUse() {
				t.Fatalf("BytesInUse %d, want the device's %d", r.BytesInUse(), sim.BytesInUse())
			}
			if binds {
				before := binder.binds
				if err := tb.BindThread(); err != nil || binder.binds != before+1 {
					t.Fatalf("BindThread: %v, %d binds; want it passed through once", err, binder.binds-before)
				}
			}
		})
	}
}
