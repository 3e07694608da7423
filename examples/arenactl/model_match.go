package main

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/checkpoint"
)

// checkModelMatches refuses a --config whose model is not the --model
// folder's checkpoint: every tensor the config's family lists
// (arena.CheckpointTensors, checkpoint layout) must be in the checkpoint
// with its shape. A family without listed names (arena.ErrNoCheckpointNames)
// is not checked. Errors name the first tensor missing or of another shape.
func checkModelMatches(cfg *arena.ModelConfig, config, dir string) error {
	want, err := arena.CheckpointTensors(cfg, arena.WeightOptions{CheckpointLayout: true})
	if errors.Is(err, arena.ErrNoCheckpointNames) {
		return nil
	}
	if err != nil {
		return err
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return fmt.Errorf("--model: %w", err)
	}
	defer ck.Close()
	for _, w := range want {
		got, ok := ck.Tensor(w.Name)
		switch {
		case !ok:
			return fmt.Errorf("--config %s is not the model of --model %s: its tensor %s is not in the checkpoint (leave --config out to use the folder's config.json)", config, dir, w.Name)
		case !slices.Equal(got.Shape, w.Shape):
			return fmt.Errorf("--config %s is not the model of --model %s: tensor %s is %v there, %v in the checkpoint", config, dir, w.Name, w.Shape, got.Shape)
		}
	}
	return nil
}
