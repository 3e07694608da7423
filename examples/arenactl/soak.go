package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

const soakLong = `Soak runs mixed operations against the manager for --duration from --clients
goroutines, and checks the invariants as it goes.

The run is a series of cycles of --cycle each. A cycle opens a manager on a
fresh device (hostsim) or the same one (cuda), builds the arena of --config
(pooled and discrete layouts alternate), and lets the clients run: forward
steps that write and read back a window of hidden_states, forward steps that
run past a buffer (they must fail with an out-of-range error), slab carves,
ledger, device and worker reads, forward steps whose context is cancelled
before they are sent or times out, and builds of an arena that exists. At the
cycle's end the manager is closed while the clients are still sending:
every client must end on ErrClosed, and Close's time is recorded.

Every --interval it prints the operations done, the errors by kind, the
ledger's bytes (and the backend's own count) and the goroutine count; at the
end a summary, with Close's longest and mean time.

Invariants (a break exits 1):
  - the ledger's bytes equal the backend's bytes in use, where the backend
    reports them (hostsim)
  - every backend call ran on one OS thread
  - every forward step read back what it wrote; a cancelled step never ran
  - every error is one the operation may give (an unexpected one breaks)
  - after Close: no device byte left (hostsim: the device's count; cuda: the
    free memory back to where it was, within 2 MiB) and no goroutine left

Exit status: 0 when every invariant held for --duration, 1 when one broke,
2 on an error, 130 when Ctrl-C stopped it early (143: SIGTERM) with every
invariant held over what ran.`

// cudaSlack is how far a real device's free memory may move between cycles
// with nothing held: the driver's 2 MiB page.
const cudaSlack = 2 << 20

// soakCmd holds the flags of "arenactl soak".
type soakCmd struct {
	app         *app
	plan        planFlags
	backend     backendFlags
	utilization float64
	duration    time.Duration
	interval    time.Duration
	cycle       time.Duration
	clients     int
}

// newSoakCmd builds "arenactl soak".
func newSoakCmd(a *app) *cobra.Command {
	c := &soakCmd{app: a}
	cmd := &cobra.Command{
		Use:   "soak [flags]",
		Short: "Run mixed operations for a long time, closing under load, and check the invariants",
		Long:  soakLong,
		Args:  cobra.NoArgs,
		RunE:  c.run,
	}
	fs := cmd.Flags()
	c.plan.register(fs, defaultRunConfig)
	useBuiltinConfig(fs, &c.plan)
	// The soak carves slabs: Qwen3-Next has one with fp8_rowwise, so it is on
	// by default here (--fp8-rowwise=false turns it off).
	c.plan.opts.FP8Rowwise = true
	fs.Lookup("fp8-rowwise").DefValue = "true"
	c.backend.register(fs, true)
	addUtilizationFlag(fs, &c.utilization)
	fs.DurationVar(&c.duration, "duration", time.Minute, "how long to run")
	fs.IntVar(&c.clients, "clients", 16, "goroutines sending requests")
	fs.DurationVar(&c.interval, "interval", 5*time.Second, "how often to print progress")
	fs.DurationVar(&c.cycle, "cycle", 30*time.Second, "how long one manager lives before it is closed under load and another opened")
	return cmd
}

// run checks the flags, runs the soak and prints its summary.
func (c *soakCmd) run(cmd *cobra.Command, _ []string) error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"duration", c.duration}, {"interval", c.interval}, {"cycle", c.cycle}} {
		if d.v <= 0 {
			return fmt.Errorf("--%s %v: must be positive", d.flag, d.v)
		}
	}
	if c.clients < 1 {
		return fmt.Errorf("--clients %d: must be at least 1", c.clients)
	}
	if err := checkUtilization(c.utilization); err != nil {
		return err
	}
	bc, err := c.backend.config(c.backend.ordinal, cmd.Flags().Changed)
	if err != nil {
		return err
	}
	if !cmd.Flags().Changed("config") {
		c.plan.config = builtinRunConfigName // loadConfig reads the built-in copy from any directory
	}
	_, plan, err := c.plan.plan(cmd.Flags().Changed)
	if err != nil {
		return err
	}
	s := &soak{
		plan: plan, clients: c.clients, duration: c.duration, interval: c.interval, cycle: c.cycle,
		utilization: c.utilization, out: cmd.OutOrStdout(), logger: c.app.logger,
		device: deviceFor(bc), backend: bc.Kind,
	}
	rep, err := s.run(cmd.Context())
	// A soak that failed (a device that would not open, say) reports its
	// error alone: a summary would say the invariants hold over what never
	// ran. One that was interrupted reports what ran.
	if rep != nil && (err == nil || cmd.Context().Err() != nil) {
		rep.writeSummary(cmd.OutOrStdout(), s)
		if cmd.Context().Err() != nil {
			// Ctrl-C ends a soak early; what ran was still checked.
			fmt.Fprintf(cmd.OutOrStdout(), "interrupted before --duration %s\n", c.duration)
		}
	}
	if err != nil {
		return err
	}
	if breaks := rep.broken(); len(breaks) > 0 {
		return negative(fmt.Errorf("invariant broken: %s", joinSemi(breaks)))
	}
	if err := context.Cause(cmd.Context()); err != nil {
		// Every manager was closed and checked, but the soak did not run
		// its --duration: not a pass (execute exits 130 for Ctrl-C).
		return fmt.Errorf("soak stopped after %s of --duration %s, every manager closed: %w",
			time.Since(rep.start).Round(time.Millisecond), c.duration, err)
	}
	return nil
}

// soakDevice opens the device of one cycle: the backend factory and, where
// the backend can tell, a function that reads its bytes in use (nil for a
// real device).
type soakDevice func() (gpuworker.BackendFactory, func() int64, error)

// deviceFor is the soakDevice of a backend configuration: a fresh simulated
// device per cycle, or the real one.
func deviceFor(bc gpuworker.BackendConfig) soakDevice {
	if bc.Kind != gpuworker.KindHostSim {
		return func() (gpuworker.BackendFactory, func() int64, error) { return bc.Factory(), nil, nil }
	}
	return func() (gpuworker.BackendFactory, func() int64, error) {
		sim, err := gpuworker.NewHostSim(bc.HostSim)
		if err != nil {
			return nil, nil, err
		}
		return func() (gpuworker.Backend, error) { return sim, nil }, sim.BytesInUse, nil
	}
}

// soak is one soak run.
type soak struct {
	plan        *arena.Plan
	clients     int
	duration    time.Duration
	interval    time.Duration
	cycle       time.Duration
	utilization float64
	out         io.Writer
	logger      *slog.Logger
	device      soakDevice
	backend     string

	cur       atomic.Pointer[gpuarena.Manager] // the cycle's manager, for progress lines
	baseFree  int64                            // cuda: the device's free memory at the first cycle's start
	firstFree bool
}

// run runs cycles until the duration is over or ctx is done (Ctrl-C: the
// cycle under way is closed as usual). An error is one that stopped the run;
// broken invariants are in the report.
func (s *soak) run(ctx context.Context) (*soakReport, error) {
	rep := newSoakReport(s.clients)
	deadline := rep.start.Add(s.duration)
	progressDone := make(chan struct{})
	stopProgress := make(chan struct{})
	go func() {
		defer close(progressDone)
		s.progress(rep, stopProgress)
	}()
	defer func() {
		close(stopProgress)
		<-progressDone
	}()
	for n := 0; ctx.Err() == nil; n++ {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		if err := s.runCycle(ctx, n, min(s.cycle, left), rep); err != nil {
			return rep, fmt.Errorf("cycle %d: %w", n, err)
		}
	}
	if s.backend != gpuworker.KindHostSim && s.firstFree {
		return rep, s.checkCUDAFree(rep, "after the last Close")
	}
	return rep, nil
}

// runCycle opens a manager, builds the arena, lets the clients run for d,
// closes the manager under load and checks what it left.
func (s *soak) runCycle(ctx context.Context, n int, d time.Duration, rep *soakReport) error {
	before := runtime.NumGoroutine()
	factory, inUse, err := s.device()
	if err != nil {
		return err
	}
	layout := []device.Layout{device.LayoutPooled, device.LayoutDiscrete}[n%2]
	m, err := gpuarena.New(gpuarena.WithBackendFactory(factory), gpuarena.WithGPUMemoryUtilization(s.utilization),
		gpuarena.WithArenaLayout(layout), gpuarena.WithLogger(s.logger))
	if err != nil {
		return err
	}
	s.cur.Store(m)
	defer s.cur.Store(nil)
	if s.backend != gpuworker.KindHostSim {
		if err := s.checkCUDAStart(m, rep, n); err != nil {
			_ = m.Close()
			return err
		}
	}
	a, err := m.BuildArena(context.Background(), s.plan)
	if err != nil {
		_ = m.Close()
		return fmt.Errorf("build the arena (%s layout): %w", layout, err)
	}
	rep.cycle.Store(int64(n))

	var wg sync.WaitGroup
	for i := range s.clients {
		wg.Go(func() { newSoakClient(m, a, rep, n, i).run() })
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	if st, err := m.Stats(context.Background()); err != nil || len(st.ThreadIDs) != 1 {
		rep.broke(fmt.Sprintf("cycle %d: the GPU actor ran on OS threads %v (%v), want exactly one", n, st.ThreadIDs, err))
	}
	start := time.Now()
	closeErr := m.Close()
	took := time.Since(start)
	wg.Wait()
	rep.closed(took)
	s.logger.Info("soak: closed under load", "cycle", n, "clients", s.clients, "duration", took)
	if closeErr != nil {
		rep.broke(fmt.Sprintf("cycle %d: Close: %v", n, closeErr))
	}
	if inUse != nil {
		if b := inUse(); b != 0 {
			rep.broke(fmt.Sprintf("cycle %d: the device holds %d B after Close", n, b))
		}
	}
	if after := settleGoroutines(before); after > before {
		rep.broke(fmt.Sprintf("cycle %d: %d goroutines after Close, %d before the manager opened", n, after, before))
	}
	rep.cycles.Add(1)
	return nil
}

// checkCUDAStart records the device's free memory at the first cycle's
// start, and checks it at every later one: what the last Close left shows.
func (s *soak) checkCUDAStart(m *gpuarena.Manager, rep *soakReport, n int) error {
	free, _, err := m.MemInfo(context.Background())
	if err != nil {
		return err
	}
	if !s.firstFree {
		s.baseFree, s.firstFree = free, true
		return nil
	}
	if d := s.baseFree - free; d > cudaSlack || d < -cudaSlack {
		rep.broke(fmt.Sprintf("cycle %d: the device has %d B free at the start, %d B less than at the first cycle's: the last Close left them", n, free, d))
	}
	return nil
}

// checkCUDAFree opens a manager only to read the device's free memory.
func (s *soak) checkCUDAFree(rep *soakReport, when string) error {
	factory, _, err := s.device()
	if err != nil {
		return err
	}
	m, err := gpuarena.New(gpuarena.WithBackendFactory(factory), gpuarena.WithLogger(s.logger))
	if err != nil {
		return err
	}
	defer m.Close()
	free, _, err := m.MemInfo(context.Background())
	if err != nil {
		return err
	}
	if d := s.baseFree - free; d > cudaSlack || d < -cudaSlack {
		rep.broke(fmt.Sprintf("%s: the device has %d B less free than at the start", when, d))
	}
	return nil
}

// progress prints a line every interval until stop is closed.
func (s *soak) progress(rep *soakReport, stop <-chan struct{}) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			rep.writeProgress(s.out, s.cur.Load())
		}
	}
}

// newRand is a client's random source: reproducible per cycle and client.
func newRand(cycle, client int) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(cycle), uint64(client)))
}

var errStepRan = errors.New("a forward step whose context was cancelled before it was sent ran")
