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
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/goleak"

	"github.com/gpuarena/gpuarena/examples/server/loadgen"
)

const loadLong = `load runs the load generator (examples/server/loadgen): --clients
concurrent streaming clients on POST /v1/completions, a seeded mix of
prompt and output lengths with shared prefixes, --requests in all, cut
after --duration. It reports requests/s, output tokens/s, time to first
token and inter-token latency (p50, p99) and the preemptions the server
counted.

Without --url it starts the server in this process with the serving flags
(on --listen, default a free loopback port), runs the load, shuts the
server down, and checks that the ledger was at 0 after the release and
that no goroutine is left; a failed check is an error (exit 2). With
--url it drives that server and checks nothing after.

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

// loadOutcome is the --json output: the report and the checks after the
// shutdown (absent with --url).
type loadOutcome struct {
	Report *loadgen.Report `json:"report"`
	// LedgerBytesAfterRelease is the ledger's bytes after the in-process
	// server's release; GoroutinesLeft what goleak found after its
	// shutdown ("" none).
	LedgerBytesAfterRelease *int64  `json:"ledger_bytes_after_release,omitempty"`
	GoroutinesLeft          *string `json:"goroutines_left,omitempty"`
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
			return c.load(cmd.Context(), stdout, stderr, cmd.Flags().Changed, f)
		},
	}
	fs := cmd.Flags()
	d := loadgen.DefaultMix
	fs.StringVar(&f.url, "url", "", "drive the server at this base URL instead of starting one")
	fs.IntVar(&f.clients, "clients", 64, "concurrent clients, each one request at a time")
	fs.IntVar(&f.requests, "requests", 512, "requests in all")
	fs.DurationVar(&f.duration, "duration", 2*time.Minute, "cut the requests still in flight after this long")
	fs.Uint64Var(&f.seed, "seed", 1, "the workload's seed")
	fs.IntSliceVar(&f.prompt, "prompt-tokens", d.PromptTokens[:], "prompt length range in tokens: min,max")
	fs.IntSliceVar(&f.output, "output-tokens", d.OutputTokens[:], "max_tokens range: min,max")
	fs.IntVar(&f.prefixes, "shared-prefixes", d.SharedPrefixes, "distinct shared prompt prefixes")
	fs.IntVar(&f.prefixTokens, "prefix-tokens", d.PrefixTokens, "tokens of each shared prefix")
	fs.Float64Var(&f.sharedFraction, "shared-fraction", d.SharedFraction, "fraction of the requests that begin with a shared prefix")
	fs.BoolVar(&f.jsonOut, "json", false, "print the report as JSON")
	return cmd
}

// config is the load generator's config of f.
func (f *loadFlags) config(url string) (loadgen.Config, error) {
	if len(f.prompt) != 2 || len(f.output) != 2 {
		return loadgen.Config{}, fmt.Errorf("--prompt-tokens %v, --output-tokens %v: each wants min,max", f.prompt, f.output)
	}
	return loadgen.Config{URL: url, Clients: f.clients, Requests: f.requests, Duration: f.duration, Seed: f.seed,
		Mix: loadgen.Mix{PromptTokens: [2]int{f.prompt[0], f.prompt[1]}, OutputTokens: [2]int{f.output[0], f.output[1]},
			SharedPrefixes: f.prefixes, PrefixTokens: f.prefixTokens, SharedFraction: f.sharedFraction}}, nil
}

// load runs "server load": see loadLong.
func (c *command) load(ctx context.Context, stdout, stderr io.Writer, changed func(string) bool, f *loadFlags) error {
	if f.url != "" {
		cfg, err := f.config(f.url)
		if err != nil {
			return err
		}
		rep, err := loadgen.Run(ctx, cfg)
		if rep != nil { // what the clients saw, also when the server went away before the end
			err = errors.Join(writeLoad(stdout, f.jsonOut, loadOutcome{Report: rep}), err)
		}
		return err
	}
	log, err := c.prepare(stderr, changed)
	if err != nil {
		return err
	}
	fmt.Fprintln(stderr, "load: no --url: starting a server in this process with the serving flags (give --url to drive a running one)")
	before := goleak.IgnoreCurrent()
	addr := "127.0.0.1:0"
	if changed("listen") {
		addr = c.listen
	}
	out, err := runLoad(ctx, c.st, log, addr, f, c.timeout)
	if err != nil {
		return err
	}
	left := ""
	if err := goleak.Find(before); err != nil {
		left = err.Error()
	}
	out.GoroutinesLeft = &left
	if err := writeLoad(stdout, f.jsonOut, out); err != nil {
		return err
	}
	if left != "" || *out.LedgerBytesAfterRelease != 0 {
		return fmt.Errorf("after the shutdown: %d B on the ledger; goroutines left: %q", *out.LedgerBytesAfterRelease, left)
	}
	return nil
}

// runLoad starts the server of st on addr, runs f's load against it and
// shuts it down within timeout, returning the report and the ledger's
// bytes after the release. Errors: a bad load config (before anything
// starts), start's, the load's (after the shutdown), the shutdown's.
func runLoad(ctx context.Context, st settings, log *slog.Logger, addr string, f *loadFlags, timeout time.Duration) (loadOutcome, error) {
	cfg, err := f.config("http://" + addr)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		return loadOutcome{}, err
	}
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
	bytes := s.released.CurrentBytes
	return loadOutcome{Report: rep, LedgerBytesAfterRelease: &bytes}, err
}

// writeLoad writes the outcome as text or JSON.
func writeLoad(w io.Writer, jsonOut bool, out loadOutcome) error {
	if jsonOut {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	out.Report.Write(w)
	if out.LedgerBytesAfterRelease != nil {
		fmt.Fprintf(w, "after the shutdown: ledger %d B, goroutines left: %s\n", *out.LedgerBytesAfterRelease, cmp.Or(*out.GoroutinesLeft, "none"))
	}
	return nil
}
