package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/examples/internal/serving"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/kernels"
)

// settings are what the server starts with (the command's flags).
type settings struct {
	config      string // config.json or a model folder; with model "", no weights
	model       string // a model folder whose weights are loaded
	opts        arena.Options
	utilization float64
	backend     gpuworker.BackendConfig
	kvBlocks    int64  // 0: every block the fit leaves room for
	name        string // the served model's name; "" is the folder's or config's base name
}

// minRequestTokens is the shortest request: one prompt token and one
// generated.
const minRequestTokens = 2

// ErrRequestLimitTooSmall is start's refusal of serving options under
// which no request could be served: max_seq_len, or the tokens the KV
// cache holds, below minRequestTokens (a prompt token and one generated).
var ErrRequestLimitTooSmall = errors.New("a request needs at least 2 tokens (a prompt token and one generated), so the server could serve nothing")

// NotFitError is start's refusal: the model does not fit the device.
// Report is the fit; Error explains it.
type NotFitError struct {
	Report *arena.FitReport
}

// Error is the fit's explanation (explainFit).
func (e *NotFitError) Error() string { return explainFit(e.Report) }

// start builds the server (newServer) and starts its engine's loop, so
// that serve only answers HTTP: a shutdown that comes before serve (a
// signal at start-up) still stops the engine, and serve then returns at
// once.
func start(ctx context.Context, st settings, log *slog.Logger) (*server, error) {
	s, err := newServer(ctx, st, log)
	if err != nil {
		return nil, err
	}
	s.engine.start()
	return s, nil
}

// newServer builds everything the server serves with, in order: the
// manager, the preflight (refused with a *NotFitError when the model does
// not fit), the weights (with --model, their progress logged every 10%),
// the arena, the KV cache the fit leaves room for, the kernels, the
// engine (its loop not started) and the HTTP server. Options under which
// no request could be served are refused with ErrRequestLimitTooSmall: a
// max_seq_len below 2 before anything is allocated, a KV cache holding
// fewer than 2 tokens before it is built. On an error everything
// allocated is released.
func newServer(ctx context.Context, st settings, log *slog.Logger) (*server, error) {
	if st.config == "" {
		st.config = st.model
	}
	if st.config == "" {
		return nil, errors.New("give --model DIR (weights) or --config FILE (no weights)")
	}
	cfg, err := arena.LoadConfig(st.config)
	if err != nil {
		return nil, err
	}
	plan, err := arena.PlanFor(cfg, st.opts)
	if err != nil {
		return nil, err
	}
	if n := plan.Options.MaxSeqLen; n < minRequestTokens {
		return nil, fmt.Errorf("max_seq_len %d: %w: give --max-seq-len %d or more (0: min(max_position_embeddings, %d))", n, ErrRequestLimitTooSmall, minRequestTokens, arena.DefaultMaxSeqLenCap)
	}
	if cfg.VocabSize < wordBase+int64(len(words)) {
		return nil, fmt.Errorf("vocab_size %d: the stand-in tokenizer needs at least %d ids", cfg.VocabSize, wordBase+len(words))
	}
	m, err := gpuarena.New(gpuarena.WithBackend(st.backend), gpuarena.WithGPUMemoryUtilization(st.utilization), gpuarena.WithLogger(log))
	if err != nil {
		return nil, err
	}
	s, err := build(ctx, m, st, cfg, plan, log)
	if err != nil {
		_, _ = m.Release(context.Background())
		return nil, errors.Join(err, m.Close())
	}
	return s, nil
}

// build is start's part after the manager is made.
func build(ctx context.Context, m *gpuarena.Manager, st settings, cfg *arena.ModelConfig, plan *arena.Plan, log *slog.Logger) (*server, error) {
	fit, err := preflight(ctx, m, st, cfg, plan, log)
	if err != nil {
		return nil, err
	}
	log.Info("server: preflight", "report", fit)
	if !fit.Fits {
		return nil, &NotFitError{Report: fit}
	}
	var weights *device.Weights
	if st.model != "" {
		if weights, err = loadWeights(ctx, m, st.model, log); err != nil {
			return nil, err
		}
	}
	a, err := m.BuildArena(ctx, plan)
	if err != nil {
		return nil, err
	}
	var req arena.KVCacheRequest
	if st.kvBlocks > 0 {
		req.Blocks = &st.kvBlocks
	}
	spec, err := arena.NewKVCacheSpec(cfg, fit, req)
	if err != nil {
		return nil, fmt.Errorf("--kv-blocks: %w", err)
	}
	if held := requestLimit(int(plan.Options.MaxSeqLen), spec); held < minRequestTokens {
		return nil, fmt.Errorf("%d KV blocks of %d tokens hold %d tokens (block 0 is the pool's null block): %w: give --kv-blocks %d or more",
			spec.Counts.Blocks, spec.BlockTokens, held, ErrRequestLimitTooSmall, 1+(minRequestTokens+spec.BlockTokens-1)/spec.BlockTokens)
	}
	if _, err := m.BuildKVCache(ctx, spec); err != nil {
		return nil, err
	}
	model, err := loadModel(ctx, m, st, cfg, a, weights)
	if err != nil {
		return nil, err
	}
	o := plan.Options
	sched, err := serving.NewLive(serving.Options{MaxBatchSize: int(o.MaxBatchSize), MaxBatchTokens: int(o.MaxBatchTokens), MaxSeqLen: int(o.MaxSeqLen), Vocab: int32(cfg.VocabSize)})
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.Collector())
	s := &server{m: m, reg: reg, metrics: newServerMetrics(reg), history: &kvHistory{}, log: log, name: st.name,
		limit: requestLimit(sched.Limit(), spec), vocab: int32(cfg.VocabSize), plan: plan, fit: fit, started: time.Now()}
	if s.name == "" {
		s.name = strings.TrimSuffix(filepath.Base(st.config), ".json")
	}
	s.engine = newEngine(m, sched, model, log, s.metrics, s.history)
	s.http = &http.Server{Handler: s.handler(), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	log.Info("server: built", "model", s.name, "arena_bytes", plan.BufferBytes, "kv_cache_bytes", spec.Bytes, "kv_blocks", spec.Counts.Blocks,
		"max_batch_tokens", o.MaxBatchTokens, "max_seq_len", o.MaxSeqLen, "max_batch_size", o.MaxBatchSize)
	return s, nil
}

// preflight fits the model on the manager's device: with weights,
// Manager.Preflight with the checkpoint's exact bytes; without, the arena
// and the KV cache alone (arena.Fit with the weights left out, on the
// device state the manager reads, nothing reserved: the context is
// already counted as used), with a warning on log when the model with its
// estimated weights would not fit.
func preflight(ctx context.Context, m *gpuarena.Manager, st settings, cfg *arena.ModelConfig, plan *arena.Plan, log *slog.Logger) (*arena.FitReport, error) {
	if st.model != "" {
		return m.Preflight(ctx, plan, cfg, gpuarena.PreflightWeights(st.model, device.LayoutPooled))
	}
	free, total, err := m.MemInfo(ctx)
	if err != nil {
		return nil, err
	}
	dm := arena.DeviceMemory{TotalBytes: total, FreeBytes: free}
	fo := arena.FitOptions{GPUMemoryUtilization: &st.utilization, ReserveBytes: new(int64(0))}
	if whole, err := arena.Fit(plan, cfg, dm, fo); err == nil && !whole.Fits {
		log.Warn("server: served without weights (--config), the model would not fit this device: its weights would not leave room for the arena and one sequence's KV cache; the KV cache takes their room instead",
			"estimated_weight_bytes", whole.WeightBytes, "budget_bytes", whole.BudgetBytes)
	}
	fo.ExcludeWeights = true
	return arena.Fit(plan, cfg, dm, fo)
}

// loadWeights loads the checkpoint of dir, logging its progress each
// time another tenth of its bytes is on the device.
func loadWeights(ctx context.Context, m *gpuarena.Manager, dir string, log *slog.Logger) (*device.Weights, error) {
	tenths := int64(0)
	w, err := m.LoadWeights(ctx, dir, gpuarena.WithLoadProgress(func(p device.LoadProgress) {
		if p.BytesTotal <= 0 {
			return
		}
		if t := p.BytesDone * 10 / p.BytesTotal; t > tenths {
			tenths = t
			log.Info("server: loading weights", "percent", t*10, "bytes_done", p.BytesDone, "bytes_total", p.BytesTotal,
				"gbps", p.BytesPerSecond/1e9, "tensor", p.Tensor)
		}
	}))
	if err != nil {
		return nil, fmt.Errorf("--model: %w", err)
	}
	log.Info("server: weights loaded", "bytes", w.Bytes, "allocated_bytes", w.AllocatedBytes, "tensors", len(w.Tensors), "load", w.Load)
	return w, nil
}

// loadModel loads the kernels and lays the stand-in model out (model.go):
// RMSNorm with layer 0's BF16 input_layernorm weight when the checkpoint
// has one, else with norm_unit_w.
func loadModel(ctx context.Context, m *gpuarena.Manager, st settings, cfg *arena.ModelConfig, a *device.Arena, w *device.Weights) (*stepModel, error) {
	mod, err := m.LoadModule(ctx, kernels.ModuleName, kernels.PTX)
	if err != nil {
		return nil, err
	}
	norm, err := mod.Function(kernels.RMSNorm)
	if err != nil {
		return nil, err
	}
	modelType, eps := normConfig(st.config)
	var weight device.DevicePtr
	offset := modelType == "qwen3_next" || strings.HasPrefix(modelType, "gemma")
	if w != nil {
		for _, t := range w.Tensors {
			if strings.HasSuffix(t.Name, "layers.0.input_layernorm.weight") && t.DType == checkpoint.BF16 && t.Bytes == 2*cfg.HiddenSize {
				weight = t.Ptr
				break
			}
		}
	}
	return newStepModel(a, cfg, norm, weight, offset, eps)
}

// normConfig reads model_type and rms_norm_eps (default 1e-6) from the
// config at path (a config.json or a folder holding one). Hugging Face's
// Qwen3NextRMSNorm and GemmaRMSNorm multiply by 1 + w, the others by w.
func normConfig(path string) (string, float32) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, "config.json")
	}
	var c struct {
		ModelType  string   `json:"model_type"`
		RMSNormEps *float64 `json:"rms_norm_eps"`
	}
	eps := float32(1e-6)
	if raw, err := os.ReadFile(path); err == nil && json.Unmarshal(raw, &c) == nil && c.RMSNormEps != nil {
		eps = float32(*c.RMSNormEps)
	}
	return c.ModelType, eps
}

// explainFit says why a fit does not fit, what it counted, and what would
// make it fit.
func explainFit(r *arena.FitReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s does not fit: it needs %s, the budget is %s (gpu_memory_utilization %g of %s): short by %s.\n",
		r.ModelType, arena.HumanBytes(r.RequiredBytes), arena.HumanBytes(r.BudgetBytes), r.GPUMemoryUtilization,
		arena.HumanBytes(r.Device.TotalBytes), arena.HumanBytes(r.ShortfallBytes))
	fmt.Fprintf(&b, "  used by others %s, weights %s (%s), arena %s, slabs %s, reserve %s, one sequence of max_seq_len %d: %s\n",
		arena.HumanBytes(r.UsedByOthersBytes), arena.HumanBytes(r.WeightBytes), r.WeightSource, arena.HumanBytes(r.ArenaBytes),
		arena.HumanBytes(r.SlabBytes), arena.HumanBytes(r.ReserveBytes), r.MaxSeqLen, arena.HumanBytes(r.SeqBytes))
	if len(r.Largest) > 0 {
		b.WriteString("  largest:")
		for _, it := range r.Largest {
			fmt.Fprintf(&b, " %s %s;", it.Name, arena.HumanBytes(it.Bytes))
		}
		b.WriteString("\n")
	}
	if s := r.Suggestions; s != nil && *s != (arena.FitSuggestions{}) {
		b.WriteString("  any one of these makes it fit:")
		if s.MaxBatchTokens > 0 {
			fmt.Fprintf(&b, " --max-batch-tokens %d", s.MaxBatchTokens)
		}
		if s.MaxSeqLen > 0 {
			fmt.Fprintf(&b, " --max-seq-len %d", s.MaxSeqLen)
		}
		if s.GPUMemoryUtilization > 0 {
			fmt.Fprintf(&b, " --gpu-memory-utilization %g", s.GPUMemoryUtilization)
		}
		if s.LogitsRows != "" {
			fmt.Fprintf(&b, " --logits-rows %s", s.LogitsRows)
		}
		b.WriteString("\n")
	}
	for _, n := range r.Notes {
		b.WriteString("  note: " + n + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// requestLimit is the longest request (prompt and output) the server takes:
// the scheduler's limit (max_seq_len: a prompt longer than max_batch_tokens
// is prefilled in chunks), and no more tokens than the paged KV cache
// holds (its blocks but the pool's null block), so a request the cache
// could never hold is refused with 400 and the limit instead of being
// dropped after it was admitted.
func requestLimit(sched int, spec *arena.KVCacheSpec) int {
	if spec.Counts.Blocks < 2 || spec.BlockTokens == 0 {
		return sched
	}
	return int(min(int64(sched), (spec.Counts.Blocks-1)*spec.BlockTokens))
}
