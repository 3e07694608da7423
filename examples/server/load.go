package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/goleak"

	"github.com/gpuarena/gpuarena/examples/server/loadgen"
)

const loadLong = `load runs the load generator (examples/server/loadgen): --clients
concurrent streaming clients on POST /v1/completions, a seeded mix of
prompt and output lengths with shared prefixes, --requests in all, cut
after --duration. It reports requests/s, output tokens/s, time to first
token and inter-token latency (p50, p99) and the preemptions the server
counted; --json prints the report as JSON (snake_case, units in the keys:
ttft_p50_ms, itl_p99_us, output_tokens_per_s).

Without --url it starts the server in this process with the serving flags
(on --listen, default a free loopback port), runs the load, shuts the
server down, and checks that the ledger was at 0 after the release and
that no goroutine is left. With --url it drives that server and checks
nothing after; the serving flags are then refused, since they would not
reach it.

Exit status: 0 when every request completed or was cut by --duration
(and, without --url, the checks after the shutdown pass); 2 when a
request failed (how many of how many, and the first error, on stderr), a
check failed, or a flag is wrong.

  server load --config examples/configs/qwen3-0.6b.json --clients 64 --requests 512`

// loadFlags are "load"'s own flags.
type loadFlags struct {
	url                    string
	clients, requests      int
	duration               time.Duration
	seed                   uint64
	prompt, output         []int
	prefixes, prefixTokens int
	sharedFraction         float64
	jsonOut                bool
}

// loadOutcome is the --json output: the report (absent when the load
// generator could not start) and, without --url, the checks after the
// shutdown.
type loadOutcome struct {
	Report        *loadgen.Report `json:"report,omitempty"`
	AfterShutdown *shutdownCheck  `json:"after_shutdown,omitempty"`
}

// shutdownCheck is what "server load" finds after the in-process
// server's shutdown.
type shutdownCheck struct {
	// LedgerBytesAfterRelease is the ledger's bytes after the release,
	// in B (want 0).
	LedgerBytesAfterRelease int64 `json:"ledger_bytes_after_release"`
	// GoroutinesLeft is each goroutine left after the shutdown as goleak
	// describes it, its stack included (want none: an empty list).
	GoroutinesLeft []string `json:"goroutines_left"`
}

// err is nil when c found nothing left, else what it found.
func (c *shutdownCheck) err() error {
	if c.LedgerBytesAfterRelease == 0 && len(c.GoroutinesLeft) == 0 {
		return nil
	}
	return fmt.Errorf("after the shutdown: %d B on the ledger, %d goroutines left; want 0 B and none", c.LedgerBytesAfterRelease, len(c.GoroutinesLeft))
}

// newLoadCommand builds "server load"; c holds the serving flags it
// starts the server with.
func newLoadCommand(c *command, stdout, stderr io.Writer) *cobra.Command {
	f := &loadFlags{}
	cmd := &cobra.Command{
		Use:   "load [--url URL | serving flags] [flags]",
		Short: "Run concurrent streaming clients against the server and report throughput and latency",
		Long:  loadLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.load(cmd.Context(), stdout, stderr, cmd.Flags(), cmd.InheritedFlags(), f)
		},
	}
	fs := cmd.Flags()
	d := loadgen.DefaultMix
	fs.StringVar(&f.url, "url", "", "drive the server at this base URL instead of starting one")
	fs.IntVar(&f.clients, "clients", 64, "concurrent clients, each one request at a time")
	fs.IntVar(&f.requests, "requests", 512, "requests in all")
	fs.DurationVar(&f.duration, "duration", 2*time.Minute, "cut the requests still in flight after this long (cut requests are not failures)")
	fs.Uint64Var(&f.seed, "seed", 1, "the workload's seed")
	fs.IntSliceVar(&f.prompt, "prompt-tokens", d.PromptTokens[:], "prompt length range in tokens: min,max")
	fs.IntSliceVar(&f.output, "output-tokens", d.OutputTokens[:], "max_tokens range: min,max")
	fs.IntVar(&f.prefixes, "shared-prefixes", d.SharedPrefixes, "distinct shared prompt prefixes")
	fs.IntVar(&f.prefixTokens, "prefix-tokens", d.PrefixTokens, "tokens of each shared prefix")
	fs.Float64Var(&f.sharedFraction, "shared-fraction", d.SharedFraction, "fraction of the requests that begin with a shared prefix")
	fs.BoolVar(&f.jsonOut, "json", false, "print the report as JSON")
	return cmd
}

// loadFlagOf is the flag of each loadgen.Config field a
// loadgen.ConfigError names.
var loadFlagOf = map[string]string{
	"URL": "url", "Clients": "clients", "Requests": "requests", "Duration": "duration",
	"Mix.PromptTokens": "prompt-tokens", "Mix.OutputTokens": "output-tokens",
	"Mix.SharedPrefixes": "shared-prefixes", "Mix.PrefixTokens": "prefix-tokens", "Mix.SharedFraction": "shared-fraction",
}

// config is the load generator's config of f, checked. Without --url its
// URL is a stand-in for the in-process server's. Errors: the flag that
// is wrong, its value and what it must be ("--clients 0: must be at
// least 1").
func (f *loadFlags) config(fs *pflag.FlagSet) (loadgen.Config, error) {
	flagValue := func(name string) string { return strings.Trim(fs.Lookup(name).Value.String(), "[]") }
	for _, name := range []string{"prompt-tokens", "output-tokens"} {
		if v, _ := fs.GetIntSlice(name); len(v) != 2 {
			return loadgen.Config{}, fmt.Errorf("--%s %s: must be min,max", name, flagValue(name))
		}
	}
	cfg := loadgen.Config{URL: cmp.Or(f.url, "http://127.0.0.1:0"), Clients: f.clients, Requests: f.requests, Duration: f.duration, Seed: f.seed,
		Mix: loadgen.Mix{PromptTokens: [2]int{f.prompt[0], f.prompt[1]}, OutputTokens: [2]int{f.output[0], f.output[1]},
			SharedPrefixes: f.prefixes, PrefixTokens: f.prefixTokens, SharedFraction: f.sharedFraction}}
	err := cfg.Validate()
	if ce, ok := errors.AsType[*loadgen.ConfigError](err); ok && loadFlagOf[ce.Field] != "" {
		name := loadFlagOf[ce.Field]
		return loadgen.Config{}, fmt.Errorf("--%s %s: %s", name, flagValue(name), ce.Want)
	}
	return cfg, err
}

// load runs "server load": see loadLong.
func (c *command) load(ctx context.Context, stdout, stderr io.Writer, fs, inherited *pflag.FlagSet, f *loadFlags) error {
	cfg, err := f.config(fs)
	if err != nil {
		return err
	}
	if f.url != "" {
		if set := servingFlagsSet(inherited); len(set) > 0 {
			return fmt.Errorf("--url drives a running server: %s would not reach it; leave them out, or leave out --url to start a server with them", strings.Join(set, ", "))
		}
		rep, err := loadgen.Run(ctx, cfg)
		if rep != nil { // what the clients saw, also when requests failed or the server went away
			err = errors.Join(err, writeLoad(stdout, f.jsonOut, loadOutcome{Report: rep}))
		}
		return err
	}
	log, err := c.prepare(stderr, fs.Changed)
	if err != nil {
		return err
	}
	fmt.Fprintln(stderr, "load: no --url: starting a server in this process with the serving flags (give --url to drive a running one)")
	before := goleak.IgnoreCurrent()
	addr := "127.0.0.1:0"
	if fs.Changed("listen") {
		addr = c.listen
	}
	out, err := runLoad(ctx, c.st, log, addr, cfg, c.timeout)
	if out.AfterShutdown == nil { // the server did not start
		return err
	}
	out.AfterShutdown.GoroutinesLeft = goroutinesLeft(before)
	return errors.Join(err, out.AfterShutdown.err(), writeLoad(stdout, f.jsonOut, out))
}

// servingFlagsSet is the serving flags given ("--config"): the server
// command's own flags (inherited), which only an in-process server takes;
// the log flags apply either way.
func servingFlagsSet(inherited *pflag.FlagSet) []string {
	var set []string
	inherited.VisitAll(func(fl *pflag.Flag) {
		if fl.Changed && fl.Name != "log-level" && fl.Name != "log-json" {
			set = append(set, "--"+fl.Name)
		}
	})
	return set
}

// runLoad starts the server of st on addr, runs cfg's load against it
// and shuts it down within timeout. The outcome has the report when the
// load ran, and the ledger's bytes after the release
// (AfterShutdown.LedgerBytesAfterRelease) when the server started.
// Errors: the listener's, start's, the load's (a *loadgen
// .RequestsFailedError when requests failed), the shutdown's.
func runLoad(ctx context.Context, st settings, log *slog.Logger, addr string, cfg loadgen.Config, timeout time.Duration) (loadOutcome, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return loadOutcome{}, fmt.Errorf("--listen: %w", err)
	}
	s, err := start(ctx, st, log)
	if err != nil {
		ln.Close()
		return loadOutcome{}, err
	}
	served := make(chan error, 1)
	go func() { served <- s.serve(ln) }()
	cfg.URL = "http://" + ln.Addr().String()
	rep, err := loadgen.Run(ctx, cfg)
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err = errors.Join(err, s.shutdown(sctx), <-served)
	return loadOutcome{Report: rep, AfterShutdown: &shutdownCheck{LedgerBytesAfterRelease: s.released.CurrentBytes}}, err
}

// goroutineHeader begins each goroutine in goleak.Find's error.
var goroutineHeader = regexp.MustCompile(`Goroutine \d+ in state `)

// goroutinesLeft is each goroutine goleak.Find finds past those before
// ignores, as goleak describes it ("Goroutine 12 in state chan receive,
// with main.f on top of the stack:" and the stack), or an empty list. An
// error whose goroutines it cannot split is one entry, whole.
func goroutinesLeft(before goleak.Option) []string {
	err := goleak.Find(before)
	if err == nil {
		return []string{}
	}
	msg := err.Error()
	at := goroutineHeader.FindAllStringIndex(msg, -1)
	if len(at) == 0 {
		return []string{msg}
	}
	left := make([]string, len(at))
	for i, m := range at {
		end := len(msg)
		if i+1 < len(at) {
			end = at[i+1][0]
		}
		left[i] = strings.TrimSpace(msg[m[0]:end])
	}
	left[len(left)-1] = strings.TrimSpace(strings.TrimSuffix(left[len(left)-1], "]")) // goleak lists them as a slice: [a b]
	return left
}

// writeLoad writes the outcome as text or JSON.
func writeLoad(w io.Writer, jsonOut bool, out loadOutcome) error {
	if jsonOut {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if out.Report != nil {
		out.Report.Write(w)
	}
	if c := out.AfterShutdown; c != nil {
		left := "none"
		if n := len(c.GoroutinesLeft); n > 0 {
			left = fmt.Sprintf("%d:", n)
		}
		fmt.Fprintf(w, "after the shutdown: ledger %d B, goroutines left: %s\n", c.LedgerBytesAfterRelease, left)
		for _, g := range c.GoroutinesLeft {
			fmt.Fprintf(w, "%s\n", g)
		}
	}
	return nil
}
