package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/examples/internal/vllmflags"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// Exit statuses.
const (
	exitOK      = 0
	exitNoFit   = 1 // the model does not fit the device
	exitFailure = 2 // a bad flag, config or device failure
)

const serverLong = `server is a reference inference server on gpuarena: it fits the model
on the device, loads its weights (--model) or plans without them
(--config), builds the arena and the paged KV cache the fit leaves room
for, and serves an OpenAI-compatible API with a continuous-batching
scheduler whose every step runs on the device. The model's math is a
stand-in (examples/server/model.go); everything around it is what an
engine runs.

  POST /v1/completions, POST /v1/chat/completions   (stream, n, stop, max_tokens, usage)
  GET  /v1/models
  GET  /metrics          gpuarena's collector and the server's (TTFT, ITL, queue, KV blocks, preemptions)
  GET  /healthz, /readyz
  GET  /debug/ledger     the ledger as JSON
  GET  /debug/memory     the device's memory drawn to scale, refreshing itself

SIGTERM or Ctrl-C shuts down gracefully: /readyz turns 503 and new
completions get 503 while the listener stays open and the requests in
flight run to their end, until --shutdown-timeout or a second SIGTERM or
Ctrl-C; then the listener closes, the streams still open are cut
(finish_reason "abort"), and everything is released before exit 0. A
third signal ends the process at once.

Exit status: 0 after a shutdown; 1 when the model does not fit (the fit's
explanation on stderr); 2 on an error.`

// command is the server's flags.
type command struct {
	st         settings
	kmax       int64
	logitsRows string
	kvDType    string
	ssmDType   string
	backend    string
	device     string
	ordinal    int
	listen     string
	timeout    time.Duration
	logLevel   string
	logJSON    bool
	// cut is closed at a second signal: the drain is cut short.
	cut <-chan struct{}
}

// newCommand builds the command and its "load" subcommand (load.go);
// cut, closed while the server drains, cuts the drain short (a second
// signal; nil: never); ready, when not nil, is called with the listener's
// address once the server serves (tests).
func newCommand(stdout, stderr io.Writer, cut <-chan struct{}, ready func(addr string)) *cobra.Command {
	c := &command{cut: cut}
	cmd := &cobra.Command{
		Use:           "server (--model DIR | --config FILE) [flags]",
		Short:         "An OpenAI-compatible inference server on gpuarena",
		Long:          serverLong,
		Args:          cobra.NoArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.run(cmd.Context(), stderr, cmd.Flags().Changed, ready)
		},
	}
	// vLLM's flag names too (--max-model-len, --max-num-seqs, …).
	cmd.SetGlobalNormalizationFunc(vllmflags.Normalize)
	fs := cmd.PersistentFlags() // "load" starts the server with them too
	fs.StringVar(&c.st.model, "model", "", "model folder (config.json and its safetensors checkpoint): load the weights and serve them")
	fs.StringVar(&c.st.config, "config", "", "Hugging Face config.json (or a folder holding one) to serve without weights: the arena and the KV cache only")
	fs.Int64Var(&c.st.opts.MaxBatchTokens, "max-batch-tokens", 0, fmt.Sprintf("max_batch_tokens: most tokens in one forward step (0: %d)", arena.DefaultMaxBatchTokens))
	fs.Int64Var(&c.st.opts.MaxSeqLen, "max-seq-len", 0, fmt.Sprintf("max_seq_len: longest sequence in tokens (0: min(max_position_embeddings, %d))", arena.DefaultMaxSeqLenCap))
	fs.BoolVar(&c.st.opts.AllowLongMaxSeqLen, "allow-long-max-seq-len", false, "allow --max-seq-len past the model's limit (max_position_embeddings and rope scaling), as vLLM's VLLM_ALLOW_LONG_MAX_MODEL_LEN does")
	fs.Int64Var(&c.st.opts.MaxBatchSize, "max-batch-size", 0, fmt.Sprintf("max_batch_size: most sequences in one step (0: min(%d, max_batch_tokens))", arena.DefaultMaxBatchSize))
	fs.Int64Var(&c.st.opts.KVBlockSize, "kv-block-size", 0, fmt.Sprintf("kv_block_size: tokens per KV block (0: %d)", arena.DefaultKVBlockSize))
	fs.Int64Var(&c.kmax, "k-max", arena.DefaultKMax, "k_max: speculative tokens verified per step (sizes the arena; 0: none)")
	fs.StringVar(&c.logitsRows, "logits-rows", string(arena.LogitsAll), "logits_rows: all or sampled")
	fs.StringVar(&c.kvDType, "kv-cache-dtype", string(arena.KVCacheAuto), "kv_cache_dtype: auto, bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2")
	fs.StringVar(&c.ssmDType, "mamba-ssm-cache-dtype", string(arena.SSMCacheAuto), "mamba_ssm_cache_dtype: auto, float32, float16, bfloat16")
	fs.Float64Var(&c.st.utilization, "gpu-memory-utilization", arena.DefaultGPUMemoryUtilization, "fraction (0, 1] of the device's total memory this process may hold; memory others use counts against it")
	fs.Int64Var(&c.st.kvBlocks, "kv-blocks", 0, "build this many paged KV blocks (at least 2: the pool keeps block 0 back) instead of all the fit leaves room for (0: all)")
	fs.StringVar(&c.backend, "backend", gpuworker.KindHostSim, "backend: "+strings.Join(gpuworker.Backends(), ", ")+" (cuda needs a -tags cuda build)")
	fs.StringVar(&c.device, "device", "h200", "hostsim: the simulated device, by name (h200, h100-80gb, rtx-4090, …)")
	fs.IntVar(&c.ordinal, "device-ordinal", 0, "cuda: the device ordinal")
	fs.StringVar(&c.st.name, "served-model-name", "", "the model's name in the API (default: the folder's or config's base name)")
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8080", "address to listen on")
	fs.DurationVar(&c.timeout, "shutdown-timeout", 30*time.Second, "how long a shutdown drains (/readyz 503, the requests in flight running to their end) before cutting the streams still open; a second signal cuts it at once")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&c.logJSON, "log-json", false, "log JSON lines instead of text")
	cmd.AddCommand(newLoadCommand(c, stdout, stderr))
	return cmd
}

// run starts the server and serves until ctx ends, then shuts down.
func (c *command) run(ctx context.Context, stderr io.Writer, changed func(string) bool, ready func(string)) error {
	log, err := c.prepare(stderr, changed)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	s, err := start(ctx, c.st, log)
	if err != nil {
		ln.Close()
		return err
	}
	served := make(chan error, 1)
	go func() { served <- s.serve(ln) }()
	if ready != nil {
		ready(ln.Addr().String())
	}
	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("server: shutting down; a second signal cuts the drain short", "timeout", c.timeout)
	case serveErr = <-served:
	}
	sctx, cancel := c.drainContext()
	defer cancel()
	err = errors.Join(serveErr, s.shutdown(sctx))
	if serveErr == nil {
		err = errors.Join(err, <-served)
	}
	if err == nil {
		log.Info("server: stopped; everything released")
	}
	return err
}

// errSecondSignal is why a drain was cut short by a second signal.
var errSecondSignal = errors.New("a second signal during the drain")

// drainContext is the shutdown's context: it ends after --shutdown-timeout,
// or at once when c.cut is closed (a second signal), its cause saying
// which. cancel releases it and returns once nothing watches c.cut.
func (c *command) drainContext() (ctx context.Context, cancel func()) {
	signalled, cutShort := context.WithCancelCause(context.Background())
	ctx, stop := context.WithTimeoutCause(signalled, c.timeout, fmt.Errorf("--shutdown-timeout %v passed", c.timeout))
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-c.cut:
			cutShort(errSecondSignal)
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		stop()
		<-done
		cutShort(nil)
	}
}

// prepare makes the logger the flags ask for and settles the flags.
func (c *command) prepare(stderr io.Writer, changed func(string) bool) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", c.logLevel)
	}
	ho := &slog.HandlerOptions{Level: lvl}
	log := slog.New(slog.NewTextHandler(stderr, ho))
	if c.logJSON {
		log = slog.New(slog.NewJSONHandler(stderr, ho))
	}
	return log, c.settle(changed)
}

// settle checks the flags and turns them into c.st.
func (c *command) settle(changed func(string) bool) error {
	if (c.st.model == "") == (c.st.config == "") {
		return errors.New("give one of --model DIR (weights) and --config FILE (no weights)")
	}
	if changed("k-max") {
		c.st.opts.KMax = &c.kmax
	}
	c.st.opts.LogitsRows = arena.LogitsRows(c.logitsRows)
	c.st.opts.KVCacheDType = arena.KVCacheDType(c.kvDType)
	c.st.opts.MambaSSMCacheDType = arena.SSMCacheDType(c.ssmDType)
	if c.timeout <= 0 {
		return fmt.Errorf("--shutdown-timeout %v: must be positive", c.timeout)
	}
	if c.st.kvBlocks < 0 || c.st.kvBlocks == 1 {
		return fmt.Errorf("--kv-blocks %d: must be 0 (all the fit allows) or at least 2 (the pool keeps block 0 back)", c.st.kvBlocks)
	}
	bc, err := c.backendConfig(changed)
	if err != nil {
		return err
	}
	c.st.backend = bc
	return nil
}

// backendConfig is the backend the flags select.
func (c *command) backendConfig(changed func(string) bool) (gpuworker.BackendConfig, error) {
	switch {
	case c.backend == gpuworker.KindHostSim:
		p, err := arena.LookupDevicePreset(c.device)
		if err != nil {
			return gpuworker.BackendConfig{}, fmt.Errorf("--device: %w", err)
		}
		return gpuworker.BackendConfig{Kind: gpuworker.KindHostSim, HostSim: gpuworker.HostSimConfig{Name: "hostsim " + p.Device, TotalBytes: p.TotalBytes}}, nil
	case !slices.Contains(gpuworker.Backends(), c.backend):
		return gpuworker.BackendConfig{}, fmt.Errorf("--backend %q: %w", c.backend, &gpuworker.BackendNotBuiltInError{Name: c.backend, Available: gpuworker.Backends()})
	case changed("device"):
		return gpuworker.BackendConfig{}, fmt.Errorf("--device %s: names a simulated device; %s reports its own", c.device, c.backend)
	}
	return gpuworker.BackendConfig{Kind: c.backend, Ordinal: c.ordinal}, nil
}
