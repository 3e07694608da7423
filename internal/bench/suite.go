package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// Suite names a group of measurements, printed as one table.
type Suite string

// The suites.
const (
	// SuiteDispatch: one client's round trip, empty and mem-info, per target.
	SuiteDispatch Suite = "dispatch"
	// SuiteContention: the round trip from Config.Clients concurrent clients.
	SuiteContention Suite = "contention"
	// SuiteBuild: arena build and release through the actors vs the same
	// driver calls made directly on a locked thread.
	SuiteBuild Suite = "build"
	// SuiteCarve: slab carves through the slab supervisor vs the arithmetic.
	SuiteCarve Suite = "carve"
)

// Suites are every suite, in the order Run runs them.
var Suites = []Suite{SuiteDispatch, SuiteContention, SuiteBuild, SuiteCarve}

// Row is one line of a suite's table: what was measured (Case), how
// (Subject), from how many client goroutines, and the Summary. Ratio compares
// the row with its baseline, named by RatioOf: for contention the same
// subject's throughput at one client (ops/s ÷ ops/s), for build and carve the
// direct row of the same case (mean ÷ mean); 0 when the row has none.
type Row struct {
	Suite   Suite  `json:"suite"`
	Case    string `json:"case"`
	Subject string `json:"subject"`
	Clients int    `json:"clients"`
	Summary
	// DriverMean (build suite) is the mean time one operation spent inside
	// the backend's Alloc, Free and Memset calls: the rest of Mean is the
	// cost of reaching the device thread and of the bookkeeping.
	DriverMean time.Duration `json:"driver_mean_ns,omitempty"`
	Ratio      float64       `json:"ratio,omitempty"`
	RatioOf    string        `json:"ratio_of,omitempty"`
	// RatioLow and RatioHigh (build suite) bound Ratio's 95% confidence
	// interval (RatioCI95 over the cycles); 0 when not computed.
	RatioLow  float64 `json:"ratio_low,omitempty"`
	RatioHigh float64 `json:"ratio_high,omitempty"`
}

// Config configures Run. DefaultConfig fills every field.
type Config struct {
	// Backend is the device every target opens (a fresh backend each).
	Backend gpuworker.BackendConfig
	// Budget bounds each row of the dispatch, contention and carve suites.
	// Contention rows make at least MinOpsPerClient operations per client.
	Budget Budget
	// BuildOps is the number of build-and-release cycles of each build row.
	BuildOps int
	// BuildIdle and SetupIdle are the least times from the previous cycle's
	// release and from a cycle's setup to its build (CycleClock; defaults
	// DefaultBuildIdle and DefaultSetupIdle). Both ≥ 0.
	BuildIdle, SetupIdle time.Duration
	// Clients are the contention suite's client counts (and the carve
	// suite's, up to 16).
	Clients []int
	// Kinds are the targets of the dispatch suite (the contention suite takes
	// those that accept concurrent clients).
	Kinds []Kind
	// Spins are the dispatcher spins the gpuarena targets are measured at.
	Spins []time.Duration
	// ManagerSpin is the dispatcher spin of the managers the build and carve
	// suites start (gpuarena.WithDispatcherSpin).
	ManagerSpin time.Duration
	// ConfigDir holds the models' config.json files, named Models[i]+".json".
	ConfigDir string
	// Models are the build suite's models; the carve suite uses CarveModel.
	Models []string
	// BatchTokens are the build suite's max_batch_tokens values.
	BatchTokens []int64
	// CarveModel is a model with GDN layers, planned with FP8Rowwise so that
	// it has the ssm_rowwise_w_bf16 slab; CarveSizes are the carves' sizes.
	CarveModel string
	CarveSizes []int64
	// OnRow, when set, is called with each row as soon as it is measured.
	OnRow func(Row)
}

// PollingSpin is the dispatcher spin measured beside 0 by default:
// gpuworker.DefaultSpin, with which a lone caller polls for its reply.
const PollingSpin = gpuworker.DefaultSpin

// MinOpsPerClient is the fewest operations each contention client makes in
// an operation-count budget, so that 4096 clients all overlap.
const MinOpsPerClient = 16

// DefaultConfig is the configuration `arenactl bench` runs by default on the
// hostsim backend: about a minute on an H200 host.
func DefaultConfig() Config {
	return Config{
		Backend:     gpuworker.BackendConfig{Kind: gpuworker.KindHostSim},
		Budget:      Budget{Ops: 20000},
		BuildOps:    20,
		BuildIdle:   DefaultBuildIdle,
		SetupIdle:   DefaultSetupIdle,
		Clients:     []int{1, 16, 256, 4096},
		Kinds:       Kinds,
		Spins:       []time.Duration{0, PollingSpin},
		ManagerSpin: gpuworker.DefaultSpin,
		ConfigDir:   "examples/configs",
		Models:      []string{"qwen3-next-80b-a3b-thinking", "deepseek-v3", "llama-3.1-8b"},
		BatchTokens: []int64{512, 8192},
		CarveModel:  "qwen3-next-80b-a3b-thinking",
		CarveSizes:  []int64{256, 4096},
	}
}

// Report is what Run measured, on which device.
type Report struct {
	Device     gpuworker.DeviceInfo `json:"device"`
	GoMaxProcs int                  `json:"gomaxprocs"`
	Date       time.Time            `json:"date"`
	Rows       []Row                `json:"rows"`
}

// Run runs the suites in the order of Suites. It keeps one backend open
// on a locked thread for the whole run (for cuda, that keeps the primary
// context alive between the targets, which each open and close their own) and
// reads the device's description from it. Once ctx is done the run stops at
// the next operation (a build cycle: before the next one), closes what it
// started, and returns the rows measured so far with ctx's error.
func Run(ctx context.Context, cfg Config, suites ...Suite) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	plans, err := cfg.loadPlans(suites)
	if err != nil {
		return nil, err
	}
	keeper, err := newDirect(cfg.Backend.Factory())
	if err != nil {
		return nil, err
	}
	rep := &Report{Device: keeper.backend.Info(), GoMaxProcs: runtime.GOMAXPROCS(0), Date: time.Now()}
	r := &runner{ctx: ctx, cfg: cfg, rep: rep, keeper: keeper, plans: plans}
	defer context.AfterFunc(ctx, func() { r.done.Store(true) })()
	for _, s := range Suites {
		if !slices.Contains(suites, s) {
			continue
		}
		if err = r.suite(s); err != nil {
			err = fmt.Errorf("bench %s: %w", s, err)
			break
		}
	}
	return rep, errors.Join(err, keeper.Close())
}

func (c Config) validate() error {
	switch {
	case !c.Budget.valid() || c.Budget.Ops < 0 || c.Budget.Duration < 0:
		return fmt.Errorf("bench: budget %+v: want ops > 0 or a duration > 0", c.Budget)
	case c.BuildOps < 1:
		return fmt.Errorf("bench: build ops %d: want at least 1", c.BuildOps)
	case c.BuildIdle < 0 || c.SetupIdle < 0:
		return fmt.Errorf("bench: build idle %v, setup idle %v: must not be negative", c.BuildIdle, c.SetupIdle)
	case slices.ContainsFunc(c.Clients, func(n int) bool { return n < 1 }):
		return fmt.Errorf("bench: clients %v: want counts ≥ 1", c.Clients)
	case slices.ContainsFunc(c.Spins, func(d time.Duration) bool { return d < 0 }) || c.ManagerSpin < 0:
		return fmt.Errorf("bench: spins %v, manager spin %v: must not be negative", c.Spins, c.ManagerSpin)
	case slices.ContainsFunc(c.CarveSizes, func(n int64) bool { return n < 1 }):
		return fmt.Errorf("bench: carve sizes %v: want sizes ≥ 1 B", c.CarveSizes)
	}
	return nil
}

// runner runs suites and collects their rows.
type runner struct {
	ctx    context.Context
	done   atomic.Bool // ctx is done: set once, read before every operation
	cfg    Config
	rep    *Report
	keeper *direct
	plans  map[planKey]*arena.Plan // every plan the suites measure (Config.loadPlans)
}

// drive is Drive with op failing with the run's context error once the
// context is done, so that a row stops at its next operation. The check is
// an atomic load, inside the measured time.
func (r *runner) drive(clients int, b Budget, op func() error) (Summary, error) {
	return Drive(clients, b, func() error {
		if r.done.Load() {
			return r.ctx.Err()
		}
		return op()
	})
}

func (r *runner) suite(s Suite) error {
	switch s {
	case SuiteDispatch:
		return r.dispatch()
	case SuiteContention:
		return r.contention()
	case SuiteBuild:
		return r.build()
	case SuiteCarve:
		return r.carve()
	default:
		return fmt.Errorf("unknown suite %q", s)
	}
}

// add records a row and reports it.
func (r *runner) add(row Row) {
	r.rep.Rows = append(r.rep.Rows, row)
	if r.cfg.OnRow != nil {
		r.cfg.OnRow(row)
	}
}

// WarmupOps is how many operations a measurement makes first, unrecorded:
// enough to fault in the code paths and settle the scheduler.
const WarmupOps = 2000

// warmOps is the number of unrecorded operations before a row of budget b:
// WarmupOps, or a tenth of a smaller operation count.
func warmOps(b Budget) int {
	if b.Duration == 0 {
		return min(WarmupOps, max(b.Ops/10, 1))
	}
	return WarmupOps
}

// eachOp starts subject s and, for each of Ops, makes warmOps unrecorded
// round trips, then calls measure with the target's call; it closes the
// target at the end. The dispatch and contention suites measure this way.
func (r *runner) eachOp(s Subject, measure func(op Op, call func(Op) error) error) error {
	t, err := s.Start(r.cfg.Backend.Factory())
	if err != nil {
		return err
	}
	err = t.Exec(func(call func(Op) error) error {
		for _, op := range Ops {
			if _, err := r.drive(1, Budget{Ops: warmOps(r.cfg.Budget)}, func() error { return call(op) }); err != nil {
				return err
			}
			if err := measure(op, call); err != nil {
				return err
			}
		}
		return nil
	})
	return errors.Join(err, t.Close())
}

// settle collects garbage so that one row's allocations are not collected
// during the next.
func settle() { runtime.GC() }
