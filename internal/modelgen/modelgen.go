// Package modelgen writes model folders for tests and `arenactl gen-model`:
// a config.json and a safetensors checkpoint of deterministic pseudo-random
// weights whose tensor names, dtypes and shapes are those of the family's
// Hugging Face checkpoints (arena.CheckpointTensors), written and sharded by
// checkpoint.Write. A folder it writes is a loadable model folder: its
// config.json states the layer count the checkpoint has.
package modelgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/checkpoint"
)

// ErrNotEmpty is wrapped by the *OutputError for an output folder that
// already holds something: Generate never mixes a new model with old files.
var ErrNotEmpty = errors.New("modelgen: output folder is not empty")

// ErrLayers is wrapped by the *LayersError for an Options.Layers outside
// [1, num_hidden_layers].
var ErrLayers = errors.New("modelgen: bad layer count")

// OutputError is an output folder Generate refuses because it is not
// empty; it unwraps to ErrNotEmpty.
type OutputError struct {
	// Dir is the folder.
	Dir string
	// Entries is how many entries it holds.
	Entries int
}

// Error is `modelgen: DIR: output folder is not empty (N entries)`.
func (e *OutputError) Error() string {
	return fmt.Sprintf("modelgen: %s: output folder is not empty (%d entries)", e.Dir, e.Entries)
}

// Unwrap returns ErrNotEmpty.
func (e *OutputError) Unwrap() error { return ErrNotEmpty }

// LayersError is an Options.Layers the config cannot give; it unwraps to
// ErrLayers.
type LayersError struct {
	// Layers is the count asked for; Max is the config's num_hidden_layers.
	Layers, Max int64
}

// Error is `modelgen: --layers N: must be in [1, MAX]`.
func (e *LayersError) Error() string {
	return fmt.Sprintf("modelgen: layers %d: must be in [1, %d] (the config's num_hidden_layers)", e.Layers, e.Max)
}

// Unwrap returns ErrLayers.
func (e *LayersError) Unwrap() error { return ErrLayers }

// Options are Generate's knobs; the zero value writes the whole model with
// seed 0 in 5 GB shards.
type Options struct {
	// Seed seeds the weights (checkpoint.WriteOptions.Seed): the same seed
	// and config give the same bytes.
	Seed uint64
	// Layers truncates the model to its first Layers decoder layers
	// (num_hidden_layers and, when present, layer_types and
	// hybrid_override_pattern are cut to match);
	// 0 keeps every layer.
	Layers int64
	// ShardBytes is the most tensor bytes per shard; 0 is
	// checkpoint.DefaultShardBytes (5 GB, as save_pretrained shards).
	ShardBytes int64
	// Weights chooses the weights' formats, as for arena.EstimateWeights.
	Weights arena.WeightOptions
	// Zeros writes zero weights as holes in sparse files
	// (checkpoint.WriteOptions.Zeros): the real tensor listing of a model
	// larger than the disk; Seed is then unused.
	Zeros bool
}

// Result is what Generate wrote.
type Result struct {
	// Dir is the model folder; Config is Dir/config.json.
	Dir, Config string
	// ModelType is the config's model_type; Layers its num_hidden_layers
	// as written.
	ModelType string
	Layers    int64
	// Tensors is the listing written, in model order.
	Tensors []checkpoint.TensorSpec
	// EstimatedBytes is arena.EstimateWeights's CheckpointBytes for the
	// written config (the weights as the checkpoint stores them, without
	// an engine's padding); it equals Manifest.TotalBytes.
	EstimatedBytes int64
	// Manifest is checkpoint.Write's: files, total bytes, CRC-32C per tensor.
	Manifest *checkpoint.Manifest
}

// Generate writes the model of the config at config (a config.json or a
// model folder holding one) into the folder dir, created if missing, which
// must be empty: dir/config.json (the source config, every field kept,
// keys sorted; num_hidden_layers, layer_types and hybrid_override_pattern
// cut to Options.Layers, in text_config for a multimodal config whose
// language model it nests; a vision tower keeps its layers) and
// the checkpoint (model.safetensors, or model-0000N-of-0000M.safetensors
// with model.safetensors.index.json past Options.ShardBytes).
//
// Errors: those of arena.LoadConfig and arena.ParseConfig (the config),
// a *LayersError (ErrLayers), arena.CheckpointTensors's (a family whose
// checkpoint names are not listed: arena.ErrNoCheckpointNames), an
// *OutputError (ErrNotEmpty) for a non-empty dir, checkpoint.Write's (an
// *checkpoint.Error), the os error creating dir or writing config.json.
func Generate(config, dir string, opts Options) (*Result, error) {
	return GenerateContext(context.Background(), config, dir, opts)
}

// GenerateContext is Generate that stops when ctx is done, leaving no
// checkpoint file behind (checkpoint.WriteContext) and returning ctx's
// error.
func GenerateContext(ctx context.Context, config, dir string, opts Options) (*Result, error) {
	cfg, err := arena.LoadConfig(config)
	if err != nil {
		return nil, err
	}
	if info, err := os.Stat(config); err == nil && info.IsDir() {
		config = filepath.Join(config, "config.json")
	}
	raw, err := readLimited(config)
	if err != nil {
		return nil, err
	}
	layers := cfg.NumLayers
	if opts.Layers != 0 {
		if opts.Layers < 0 || opts.Layers > cfg.NumLayers {
			return nil, &LayersError{Layers: opts.Layers, Max: cfg.NumLayers}
		}
		if raw, err = truncate(raw, opts.Layers); err != nil {
			return nil, err
		}
		if cfg, err = arena.ParseConfig(raw); err != nil {
			return nil, fmt.Errorf("modelgen: the truncated config: %w", err)
		}
		layers = opts.Layers
	}
	tensors, err := arena.CheckpointTensors(cfg, opts.Weights)
	if err != nil {
		return nil, err
	}
	est, err := arena.EstimateWeights(cfg, opts.Weights)
	if err != nil {
		return nil, err
	}
	if err := checkEmpty(dir); err != nil {
		return nil, err
	}
	m, err := checkpoint.WriteContext(ctx, dir, tensors, checkpoint.WriteOptions{Seed: opts.Seed, ShardBytes: opts.ShardBytes, Zeros: opts.Zeros})
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		return nil, fmt.Errorf("modelgen: %w", err)
	}
	return &Result{Dir: dir, Config: path, ModelType: cfg.ModelType, Layers: layers, Tensors: tensors,
		EstimatedBytes: est.CheckpointBytes, Manifest: m}, nil
}

// ForTest generates the model of config into a fresh t.TempDir() and
// returns what it wrote; any error fails the test.
func ForTest(tb testing.TB, config string, opts Options) *Result {
	tb.Helper()
	r, err := Generate(config, tb.TempDir(), opts)
	if err != nil {
		tb.Fatalf("modelgen.Generate(%s): %v", config, err)
	}
	return r
}

// readLimited reads path, refusing more than arena.MaxConfigBytes.
func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("modelgen: %w", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, arena.MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("modelgen: %w", err)
	}
	if len(raw) > arena.MaxConfigBytes {
		return nil, fmt.Errorf("modelgen: %s: more than %d bytes", path, arena.MaxConfigBytes)
	}
	return raw, nil
}

// truncate returns the config raw with num_hidden_layers set to layers
// (Generate checked it is in [1, num_hidden_layers]), layer_types (when an
// array) cut to its first layers entries and hybrid_override_pattern
// (Nemotron-H, when a string) to its first layers characters, in
// text_config when the config nests the language model there, indented by
// 2 with keys sorted. Errors: the JSON error of a config (or text_config)
// that is not an object.
func truncate(raw []byte, layers int64) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("modelgen: config: %w", err)
	}
	if text, ok := obj["text_config"]; ok && string(text) != "null" {
		cut, err := truncate(text, layers)
		if err != nil {
			return nil, fmt.Errorf("modelgen: text_config: %w", err)
		}
		obj["text_config"] = json.RawMessage(cut)
		return marshalConfig(obj)
	}
	obj["num_hidden_layers"] = json.RawMessage(fmt.Sprint(layers))
	if lt, ok := obj["layer_types"]; ok {
		var types []json.RawMessage
		if err := json.Unmarshal(lt, &types); err == nil && int64(len(types)) > layers {
			b, err := json.Marshal(types[:layers])
			if err != nil {
				return nil, fmt.Errorf("modelgen: layer_types: %w", err)
			}
			obj["layer_types"] = b
		}
	}
	if hp, ok := obj["hybrid_override_pattern"]; ok {
		var pattern string
		if err := json.Unmarshal(hp, &pattern); err == nil && int64(len(pattern)) > layers {
			b, err := json.Marshal(pattern[:layers])
			if err != nil {
				return nil, fmt.Errorf("modelgen: hybrid_override_pattern: %w", err)
			}
			obj["hybrid_override_pattern"] = b
		}
	}
	return marshalConfig(obj)
}

// marshalConfig writes obj indented by 2, keys sorted, with a final newline.
func marshalConfig(obj map[string]json.RawMessage) ([]byte, error) {
	out, err := json.MarshalIndent(obj, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("modelgen: config: %w", err)
	}
	return append(out, '\n'), nil
}

// checkEmpty refuses a dir that exists and holds any entry.
func checkEmpty(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("modelgen: %w", err)
	case len(entries) > 0:
		return &OutputError{Dir: dir, Entries: len(entries)}
	}
	return nil
}
