package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
)

// fitAccuracyTolerance is the largest relative gap, |fit/vLLM − 1|, that a
// row's figure may have without a written cause (docs/fit-accuracy.md).
const fitAccuracyTolerance = 0.05

// accuracyRow is one public vLLM start-up, with the options it ran with, what
// vLLM logged, and what the fit gives for the same options; one file of
// testdata/fit_accuracy each. docs/fit-accuracy.md is its table.
type accuracyRow struct {
	// ID names the row in the test and the doc.
	ID string `json:"id"`
	// Model is the Hugging Face repository vLLM served.
	Model string `json:"model"`
	// Config is its config.json under examples/configs.
	Config string `json:"config"`
	// Source is where the start-up log was published.
	Source string `json:"source"`
	// VLLMVersion is the vLLM release that logged it.
	VLLMVersion string `json:"vllm_version"`
	// GPU is the card; DeviceTotal its total memory as vLLM or PyTorch
	// logged it, DeviceTotalBytes that total in bytes.
	GPU              string `json:"gpu"`
	DeviceTotal      string `json:"device_total"`
	DeviceTotalBytes int64  `json:"device_total_bytes"`
	// Options are vLLM's serving options, defaults spelled out.
	Options vllmOptions `json:"options"`
	// FitOptions are the fit's options that carry vLLM's semantics.
	FitOptions fitOptions `json:"fit_options"`
	// VLLM is what vLLM logged.
	VLLM vllmFigures `json:"vllm"`
	// Fit is what the fit gives today for the same options.
	Fit fitFigures `json:"fit"`
}

// vllmOptions are the vLLM engine arguments that size its memory.
type vllmOptions struct {
	GPUMemoryUtilization float64 `json:"gpu_memory_utilization"`
	MaxModelLen          int64   `json:"max_model_len"`
	MaxNumBatchedTokens  int64   `json:"max_num_batched_tokens"`
	MaxNumSeqs           int64   `json:"max_num_seqs"`
	BlockSize            int64   `json:"block_size"`
	// KVCacheDType is vLLM's kv_cache_dtype: "auto" (the model dtype) or "fp8".
	KVCacheDType       string `json:"kv_cache_dtype"`
	TensorParallelSize int64  `json:"tensor_parallel_size"`
}

// fitOptions are the fit's options that say how vLLM computes, beside the
// serving options the row's vLLM options map to.
type fitOptions struct {
	// LogitsRows is logits_rows: "sampled" for vLLM, which computes logits
	// for the sampled positions only.
	LogitsRows arena.LogitsRows `json:"logits_rows"`
	// UtilizationScope is "instance" for vLLM's V1 engine (others' memory
	// is not in its budget), "device" for its V0 engine.
	UtilizationScope arena.UtilizationScope `json:"utilization_scope"`
	// MXFP4Backend is the MXFP4 MoE kernel vLLM used, whose padding the
	// weights are sized with (gpt-oss only).
	MXFP4Backend *arena.MXFP4Backend `json:"mxfp4_backend,omitempty"`
	// ReserveBytes is the fit's reserve in bytes; unset, its default.
	ReserveBytes *int64 `json:"reserve_bytes,omitempty"`
	// SamplerWarmup is the vLLM sampler pass the row's version runs:
	// "profiled" for V1 up to 0.16, "after_kv_cache" from 0.17, unset
	// ("none") for the V0 rows.
	SamplerWarmup arena.SamplerWarmup `json:"sampler_warmup,omitempty"`
	// CUDAGraphs is where the row's version counts its CUDA graphs:
	// "after_kv_cache" for V1 before 0.21 (captured after the KV cache is
	// sized, outside the budget), unset ("none": the reserve covers them)
	// for the V0 rows.
	CUDAGraphs arena.CUDAGraphs `json:"cuda_graphs,omitempty"`
}

// vllmFigures are vLLM's start-up lines; a zero figure was not logged.
type vllmFigures struct {
	// Verdict is "runs" (the server started) or "fails" (it refused or ran
	// out of memory at start-up).
	Verdict string `json:"verdict"`
	// WeightsGiB is "Model loading took X GiB" (GiB = 2^30 B).
	WeightsGiB float64 `json:"weights_gib,omitempty"`
	// KVGiB is "Available KV cache memory: X GiB".
	KVGiB float64 `json:"kv_gib,omitempty"`
	// KVTokens is "GPU KV cache size: N tokens".
	KVTokens int64 `json:"kv_tokens,omitempty"`
	// Concurrency is "Maximum concurrency for max_model_len tokens per request: X".
	Concurrency float64 `json:"concurrency,omitempty"`
	// CUDAGraphsGiB is "Graph capturing finished in N secs, took X GiB".
	CUDAGraphsGiB float64 `json:"cuda_graphs_gib,omitempty"`
}

// fitFigures are the fit's verdict and its figures as ratios to vLLM's,
// each a [low, high] band the test asserts.
type fitFigures struct {
	// Verdict is the fit's: "runs" (it fits) or "fails".
	Verdict string `json:"verdict"`
	// Mismatch, set exactly when Verdict is not vLLM's, names the fit
	// option or model change that would make them agree.
	Mismatch string `json:"mismatch,omitempty"`
	// Fix, when the fit has options that make it agree with vLLM, are those
	// options in place of the row's fit options.
	Fix *fitOptions `json:"fix,omitempty"`
	// Weights is the fit's weight bytes over vLLM's WeightsGiB; KVGiB the
	// fit's KV budget over vLLM's KVGiB; KVTokens the fit's KV tokens over
	// vLLM's; Concurrency the fit's KV budget over one max_seq_len sequence,
	// over vLLM's Concurrency; CUDAGraphs the fit's CUDA-graph estimate over
	// vLLM's CUDAGraphsGiB.
	Weights     *ratioBand `json:"weights,omitempty"`
	KVGiB       *ratioBand `json:"kv_gib,omitempty"`
	KVTokens    *ratioBand `json:"kv_tokens,omitempty"`
	Concurrency *ratioBand `json:"concurrency,omitempty"`
	CUDAGraphs  *ratioBand `json:"cuda_graphs,omitempty"`
	// GapCause explains every band wider than fitAccuracyTolerance.
	GapCause string `json:"gap_cause,omitempty"`
}

// ratioBand is [low, high], the range a fit/vLLM ratio must lie in.
type ratioBand [2]float64

// gib is 2^30 bytes.
const gib = 1 << 30

// loadAccuracyRows reads every row of testdata/fit_accuracy, refusing a
// field the row types do not have and a file not named by its row's id.
func loadAccuracyRows(t *testing.T) []accuracyRow {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "fit_accuracy", "*.json"))
	if err != nil || len(paths) < 12 {
		t.Fatalf("found %d rows in testdata/fit_accuracy (%v), want at least 12", len(paths), err)
	}
	rows := make([]accuracyRow, 0, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var r accuracyRow
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if want := strings.TrimSuffix(filepath.Base(p), ".json"); r.ID != want {
			t.Fatalf("%s: id %q, want the file's name %q", p, r.ID, want)
		}
		rows = append(rows, r)
	}
	return rows
}

// checkAccuracyRow checks what a row must state before the fit runs.
func checkAccuracyRow(t *testing.T, r accuracyRow) {
	t.Helper()
	o := r.Options
	switch {
	case !strings.HasPrefix(r.Source, "https://"), r.VLLMVersion == "", r.GPU == "", r.DeviceTotal == "":
		t.Fatalf("row must name its source URL, vLLM version, GPU and device total: %+v", r)
	case o.TensorParallelSize != 1:
		t.Fatalf("tensor_parallel_size %d: the fit is per device, rows are TP = 1", o.TensorParallelSize)
	case r.DeviceTotalBytes <= 0, o.GPUMemoryUtilization <= 0, o.MaxModelLen <= 0, o.MaxNumBatchedTokens <= 0,
		o.MaxNumSeqs <= 0, o.BlockSize <= 0, o.KVCacheDType == "":
		t.Fatalf("options incomplete: %+v, device %d B", o, r.DeviceTotalBytes)
	case !slices.Contains([]string{"runs", "fails"}, r.VLLM.Verdict), !slices.Contains([]string{"runs", "fails"}, r.Fit.Verdict):
		t.Fatalf("verdicts %q (vLLM) and %q (fit), want runs or fails", r.VLLM.Verdict, r.Fit.Verdict)
	case (r.Fit.Verdict != r.VLLM.Verdict) != (r.Fit.Mismatch != ""), r.Fit.Fix != nil && r.Fit.Mismatch == "":
		t.Fatalf("the fit says %s, vLLM %s: a row names the fix (mismatch) exactly when they differ; mismatch %q",
			r.Fit.Verdict, r.VLLM.Verdict, r.Fit.Mismatch)
	}
	if math.Abs(float64(r.DeviceTotalBytes)/gib-parseGiB(t, r.DeviceTotal)) > 0.01 {
		t.Fatalf("device_total_bytes %d is not %s", r.DeviceTotalBytes, r.DeviceTotal)
	}
}

// parseGiB reads "79.19 GiB".
func parseGiB(t *testing.T, s string) float64 {
	t.Helper()
	var v float64
	if _, err := fmt.Sscanf(s, "%g GiB", &v); err != nil {
		t.Fatalf("device_total %q: %v", s, err)
	}
	return v
}

// fitRow runs the fit with the row's vLLM options: max_model_len is
// max_seq_len, max_num_batched_tokens max_batch_tokens, max_num_seqs
// max_batch_size (at most max_batch_tokens), block_size kv_block_size,
// kv_cache_dtype kv_cache_dtype, no speculative decoding (k_max 0), no
// memory used by other processes, the fit's default reserve (its context
// part when the row sizes CUDA graphs), and the row's fit options.
func fitRow(t *testing.T, r accuracyRow, fit fitOptions) *arena.FitReport {
	t.Helper()
	cfg, err := arena.LoadConfig(filepath.Join("..", "examples", "configs", r.Config))
	if err != nil {
		t.Fatal(err)
	}
	o := r.Options
	plan, err := arena.PlanFor(cfg, arena.Options{
		MaxSeqLen:      o.MaxModelLen,
		MaxBatchTokens: o.MaxNumBatchedTokens,
		MaxBatchSize:   min(o.MaxNumSeqs, o.MaxNumBatchedTokens),
		KVBlockSize:    o.BlockSize,
		KMax:           new(int64(0)),
		KVCacheDType:   arena.KVCacheDType(o.KVCacheDType),
		LogitsRows:     fit.LogitsRows,
	})
	if err != nil {
		t.Fatal(err)
	}
	fo := arena.FitOptions{GPUMemoryUtilization: new(o.GPUMemoryUtilization), UtilizationScope: fit.UtilizationScope,
		ReserveBytes: fit.ReserveBytes, SamplerWarmup: fit.SamplerWarmup, CUDAGraphs: fit.CUDAGraphs}
	if b := fit.MXFP4Backend; b != nil {
		fo.Weights.MXFP4Backend = *b
	}
	rep, err := arena.Fit(plan, cfg, arena.DeviceMemory{TotalBytes: r.DeviceTotalBytes, FreeBytes: r.DeviceTotalBytes}, fo)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// checkBand asserts fit/vLLM within band, and a band wider than the
// tolerance only with a cause.
func checkBand(t *testing.T, r accuracyRow, what string, band *ratioBand, fit, vllm float64) {
	t.Helper()
	if band == nil {
		return
	}
	if vllm <= 0 || band[0] > band[1] {
		t.Fatalf("%s: band [%g, %g] against vLLM's figure %g: a band needs vLLM's figure and low ≤ high", what, band[0], band[1], vllm)
	}
	ratio := fit / vllm
	t.Logf("%-11s fit %12.2f  vLLM %12.2f  ratio %.3f", what, fit, vllm, ratio)
	if ratio < band[0] || ratio > band[1] {
		t.Errorf("%s: fit/vLLM = %.4f (fit %.2f, vLLM %.2f), outside the row's band [%g, %g]", what, ratio, fit, vllm, band[0], band[1])
	}
	if (band[0] < 1-fitAccuracyTolerance || band[1] > 1+fitAccuracyTolerance) && r.Fit.GapCause == "" {
		t.Errorf("%s: band [%g, %g] is wider than ±%g without a gap_cause", what, band[0], band[1], fitAccuracyTolerance)
	}
}

// Every public vLLM start-up in testdata/fit_accuracy keeps its verdict
// (runs / fails) and its figures within the bands docs/fit-accuracy.md
// documents; a row where the fit and vLLM disagree names the fix.
func TestFitAccuracyAgainstVLLM(t *testing.T) {
	for _, r := range loadAccuracyRows(t) {
		t.Run(r.ID, func(t *testing.T) {
			checkAccuracyRow(t, r)
			rep := fitRow(t, r, r.FitOptions)
			verdict := map[bool]string{true: "runs", false: "fails"}[rep.Fits]
			if verdict != r.Fit.Verdict {
				t.Errorf("the fit says %s (shortfall %d B, KV budget %d B), the row records %s: update the row and docs/fit-accuracy.md",
					verdict, rep.ShortfallBytes, rep.KVBudgetBytes, r.Fit.Verdict)
			}
			concurrency := 0.0
			if rep.SeqBytes > 0 {
				concurrency = float64(rep.KVBudgetBytes) / float64(rep.SeqBytes)
			}
			t.Logf("fit: %s; weights %.2f GiB, KV budget %.2f GiB, %d KV tokens, %.2f sequences of max_seq_len, CUDA graphs %.2f GiB, "+
				"outside the budget %.2f GiB for %.2f GiB, shortfall %.2f GiB",
				verdict, float64(rep.WeightBytes)/gib, float64(rep.KVBudgetBytes)/gib, rep.KVTokens, concurrency, float64(rep.CUDAGraphBytes)/gib,
				float64(rep.OutsideBudgetBytes)/gib, float64(rep.OutsideRequiredBytes)/gib, float64(rep.ShortfallBytes)/gib)
			checkBand(t, r, "weights GiB", r.Fit.Weights, float64(rep.WeightBytes)/gib, r.VLLM.WeightsGiB)
			checkBand(t, r, "KV GiB", r.Fit.KVGiB, float64(rep.KVBudgetBytes)/gib, r.VLLM.KVGiB)
			checkBand(t, r, "KV tokens", r.Fit.KVTokens, float64(rep.KVTokens), float64(r.VLLM.KVTokens))
			checkBand(t, r, "concurrency", r.Fit.Concurrency, concurrency, r.VLLM.Concurrency)
			checkBand(t, r, "CUDA graphs", r.Fit.CUDAGraphs, float64(rep.CUDAGraphBytes)/gib, r.VLLM.CUDAGraphsGiB)
			if r.Fit.Fix != nil {
				if fixed := fitRow(t, r, *r.Fit.Fix); fixed.Fits != (r.VLLM.Verdict == "runs") {
					t.Errorf("with the row's fix %+v the fit says fits=%v, vLLM %s", *r.Fit.Fix, fixed.Fits, r.VLLM.Verdict)
				}
			}
		})
	}
}
