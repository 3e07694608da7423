package gpuworker_test

import (
	"errors"
	"math"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// h200DriverBytes is an H200's total memory as cuMemGetInfo reports it
// (docs/gpu-validation.md).
const h200DriverBytes = 150_109_880_320

// lyingMemInfo is a simulated device whose MemInfo reports free bytes of
// its own choosing, for a device state HostSim refuses to simulate (more
// used by others than the device has).
type lyingMemInfo struct {
	*gpuworker.HostSim
	free int64
}

func (b lyingMemInfo) MemInfo() (freeBytes, totalBytes int64, err error) {
	_, total, err := b.HostSim.MemInfo()
	return b.free, total, err
}

// TestWorkerBudgetEqualsFit: for every device state of the table, the GPU
// worker's budget (Worker.Budget, on a simulated device of that total with
// that much held by others) is the number the preflight fit reports
// (FitReport.ProcessBudgetBytes) and arena.Budget returns, to the byte; and
// where there is no budget, the worker refuses to start and the fit does
// not fit, with the same cause.
func TestWorkerBudgetEqualsFit(t *testing.T) {
	cfg, err := arena.LoadConfig("../examples/configs/llama-3.1-8b.json")
	if err != nil {
		t.Fatal(err)
	}
	// A small plan keeps the fit's suggestion searches short; the budget
	// does not depend on the plan.
	plan, err := arena.PlanFor(cfg, arena.Options{MaxBatchTokens: 16, MaxSeqLen: 64})
	if err != nil {
		t.Fatal(err)
	}
	const unset = -1 // utilization: leave the option unset (the default 0.9)
	tests := []struct {
		name          string
		util          float64
		total, others int64
		want          int64 // the budget; 0: none (want the errors below)
		wantErr       error // the worker's Start error when want is 0
	}{
		{"unset is 0.9, H200", unset, h200DriverBytes, 0, 135_098_892_288, nil},
		{"H200 at 0.9", 0.9, h200DriverBytes, 0, 135_098_892_288, nil},
		{"H200 at 0.95", 0.95, h200DriverBytes, 0, 142_604_386_304, nil},
		{"H200 at 0.9, 4 GiB + 12345 B held by others", 0.9, h200DriverBytes, 4<<30 + 12_345, 130_803_912_647, nil},
		{"H200 at 1", 1, h200DriverBytes, 0, h200DriverBytes, nil},
		{"0.9 of an odd total", 0.9, 1_000_000_007, 0, 900_000_006, nil},
		{"0.9 of an odd total less others", 0.9, 999_999_999_999, 123_456_789, 899_876_543_210, nil},
		{"1 less all but a byte", 1, 12_345, 12_344, 1, nil},
		{"1e-9 of an H200", 1e-9, h200DriverBytes, 0, 150, nil},
		{"1e-9 of MaxInt64", 1e-9, math.MaxInt64, 0, 9_223_372_036, nil},
		{"1 of MaxInt64", 1, math.MaxInt64, 0, math.MaxInt64, nil},
		{"0.9 of MaxInt64", 0.9, math.MaxInt64, 0, 8_301_034_833_169_298_226, nil},
		{"0.9999999999999999 of MaxInt64 less others", 0.9999999999999999, math.MaxInt64, 12_345, 9_223_372_036_854_762_539, nil},
		{"H200 at 0.9, others hold all but a byte of it", 0.9, h200DriverBytes, 135_098_892_287, 1, nil},
		{"H200 at 0.9, others hold all of it", 0.9, h200DriverBytes, 135_098_892_288, 0, arena.ErrNoBudget},
		{"others hold the whole device", 0.9, h200DriverBytes, h200DriverBytes, 0, arena.ErrNoBudget},
		{"0.9 of a 1 B device", 0.9, 1, 0, 0, arena.ErrNoBudget},
		{"1e-9 of 100 B", 1e-9, 100, 0, 0, arena.ErrNoBudget},
		{"others hold more than the device", 0.9, h200DriverBytes, h200DriverBytes + 1, 0, arena.ErrInvalidOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			util := tt.util
			var workerOpts []gpuworker.WorkerOption
			var fitOpts arena.FitOptions
			if util == unset {
				util = arena.DefaultGPUMemoryUtilization
			} else {
				workerOpts = append(workerOpts, gpuworker.WithGPUMemoryUtilization(util))
				fitOpts.GPUMemoryUtilization = &util
			}

			// arena.Budget, the one function both use.
			b, budgetErr := arena.Budget(util, tt.total, tt.others)
			if b != tt.want || (tt.want == 0) != (budgetErr != nil) || (tt.wantErr != nil && !errors.Is(budgetErr, tt.wantErr)) {
				t.Fatalf("arena.Budget(%g, %d, %d) = %d, %v; want %d (error %v)", util, tt.total, tt.others, b, budgetErr, tt.want, tt.wantErr)
			}

			// The GPU worker, on a device in that state.
			w, workerErr := startOnDevice(t, tt.total, tt.others, workerOpts...)
			switch {
			case tt.want > 0 && workerErr != nil:
				t.Fatalf("Start: %v, want a budget of %d B", workerErr, tt.want)
			case tt.want > 0 && w.Budget() != tt.want:
				t.Errorf("Worker.Budget() = %d B, want %d B", w.Budget(), tt.want)
			case tt.want == 0 && tt.wantErr == arena.ErrNoBudget &&
				!(errors.Is(workerErr, gpuworker.ErrOutOfMemory) && errors.Is(workerErr, arena.ErrNoBudget)):
				t.Errorf("Start: %v, want ErrOutOfMemory and arena.ErrNoBudget", workerErr)
			case tt.want == 0 && tt.wantErr == arena.ErrInvalidOption &&
				!(errors.Is(workerErr, gpuworker.ErrDriver) && errors.Is(workerErr, arena.ErrInvalidOption)):
				t.Errorf("Start: %v, want ErrDriver and arena.ErrInvalidOption (the device's report is impossible)", workerErr)
			}

			// The preflight fit, on the same device state.
			r, fitErr := arena.Fit(plan, cfg, arena.DeviceMemory{TotalBytes: tt.total, FreeBytes: tt.total - tt.others}, fitOpts)
			switch {
			case tt.wantErr == arena.ErrInvalidOption:
				var oe *arena.OptionError
				if !errors.As(fitErr, &oe) || oe.Option != "free_bytes" {
					t.Errorf("Fit: %v, want an *arena.OptionError for free_bytes", fitErr)
				}
			case fitErr != nil:
				t.Fatalf("Fit: %v", fitErr)
			case r.ProcessBudgetBytes != tt.want:
				t.Errorf("Fit's process budget %d B, want %d B (the worker's)", r.ProcessBudgetBytes, tt.want)
			case tt.want == 0 && r.Fits:
				t.Errorf("Fit fits with no budget left: %+v", r)
			}
		})
	}
}

// startOnDevice starts a worker on a simulated device of total bytes of
// which others hold others (past the device: a device that reports so),
// stopped when the test ends.
func startOnDevice(t *testing.T, total, others int64, opts ...gpuworker.WorkerOption) (*gpuworker.Worker, error) {
	t.Helper()
	sim, err := gpuworker.NewHostSim(gpuworker.HostSimConfig{TotalBytes: total, UsedByOthersBytes: min(others, total)})
	if err != nil {
		t.Fatal(err)
	}
	var b gpuworker.Backend = sim
	if others > total {
		b = lyingMemInfo{HostSim: sim, free: total - others}
	}
	w, err := gpuworker.Start(newSystem(t), func() (gpuworker.Backend, error) { return b, nil },
		append([]gpuworker.WorkerOption{gpuworker.WithLogger(quiet)}, opts...)...)
	if err == nil {
		t.Cleanup(w.Stop)
	}
	return w, err
}

// TestUtilizationOptions: unset is 0.9; a set 0, or any value outside
// (0, 1], is the typed option error; WithoutBudget sets no budget and
// excludes WithGPUMemoryUtilization.
func TestUtilizationOptions(t *testing.T) {
	const total = 1000 * mib
	tests := []struct {
		name       string
		opts       []gpuworker.WorkerOption
		wantBudget int64
		wantErr    bool
	}{
		{"unset is 0.9", nil, 900 * mib, false},
		{"0.5", []gpuworker.WorkerOption{gpuworker.WithGPUMemoryUtilization(0.5)}, 500 * mib, false},
		{"without budget", []gpuworker.WorkerOption{gpuworker.WithoutBudget()}, 0, false},
		{"0 is invalid", []gpuworker.WorkerOption{gpuworker.WithGPUMemoryUtilization(0)}, 0, true},
		{"over 1 is invalid", []gpuworker.WorkerOption{gpuworker.WithGPUMemoryUtilization(1.5)}, 0, true},
		{"NaN is invalid", []gpuworker.WorkerOption{gpuworker.WithGPUMemoryUtilization(math.NaN())}, 0, true},
		{"both without budget and a utilization", []gpuworker.WorkerOption{gpuworker.WithoutBudget(), gpuworker.WithGPUMemoryUtilization(0.5)}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := startOnDevice(t, total, 0, tt.opts...)
			if tt.wantErr {
				if !errors.Is(err, gpuworker.ErrInvalidValue) {
					t.Fatalf("Start: %v, want ErrInvalidValue", err)
				}
				var oe *arena.OptionError
				if tt.name != "both without budget and a utilization" && (!errors.As(err, &oe) || oe.Option != "gpu_memory_utilization") {
					t.Fatalf("Start: %v, want an *arena.OptionError for gpu_memory_utilization", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if w.Budget() != tt.wantBudget {
				t.Errorf("Budget() = %d B, want %d B", w.Budget(), tt.wantBudget)
			}
		})
	}
}

// TestHostSimUsedByOthers: memory held by others is not free, and the
// device refuses an allocation into it.
func TestHostSimUsedByOthers(t *testing.T) {
	w, sim := startSim(t, gpuworker.HostSimConfig{TotalBytes: 100 * mib, UsedByOthersBytes: 30 * mib}, gpuworker.WithoutBudget())
	if free, total, err := sim.MemInfo(); err != nil || free != 70*mib || total != 100*mib {
		t.Fatalf("MemInfo = %d, %d, %v; want 70 MiB free of 100 MiB", free, total, err)
	}
	mustAlloc(t, w, "o", 70*mib)
	_, err := w.Alloc(bounded(t), "o", "over", 1)
	var oom *gpuworker.OutOfMemoryError
	if !errors.As(err, &oom) || oom.OverBudget || oom.DeviceFree != 0 {
		t.Fatalf("alloc past the 70 MiB others leave: %v, want the device's *OutOfMemoryError with 0 B free", err)
	}
	for name, others := range map[string]int64{"negative": -1, "past the total": 100*mib + 1} {
		t.Run(name, func(t *testing.T) {
			if _, err := gpuworker.NewHostSim(gpuworker.HostSimConfig{TotalBytes: 100 * mib, UsedByOthersBytes: others}); !errors.Is(err, gpuworker.ErrInvalidValue) {
				t.Errorf("NewHostSim with %d B used by others: %v, want ErrInvalidValue", others, err)
			}
		})
	}
}
