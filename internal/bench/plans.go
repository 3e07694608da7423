package bench

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpuarena/gpuarena/arena"
)

// planKey names one plan a run measures: a model (a config file in
// Config.ConfigDir) and the serving options it is planned with.
type planKey struct {
	model string
	opts  arena.Options
}

// carveOptions plan CarveModel so that it has the ssm_rowwise_w_bf16 slab.
var carveOptions = arena.Options{MaxBatchTokens: 512, FP8Rowwise: true}

// loadPlans loads and plans every model the suites need before anything is
// measured, so that a misspelt model or a broken config fails the run at
// once instead of after the suites before the one that needs it.
func (c Config) loadPlans(suites []Suite) (map[planKey]*arena.Plan, error) {
	var need []planKey
	if slices.Contains(suites, SuiteBuild) {
		for _, model := range c.Models {
			for _, m := range c.BatchTokens {
				need = append(need, planKey{model, arena.Options{MaxBatchTokens: m}})
			}
		}
	}
	if slices.Contains(suites, SuiteCarve) {
		need = append(need, planKey{c.CarveModel, carveOptions})
	}
	plans := make(map[planKey]*arena.Plan, len(need))
	for _, k := range need {
		if _, ok := plans[k]; ok {
			continue
		}
		p, err := c.loadPlan(k.model, k.opts)
		if err != nil {
			return nil, err
		}
		plans[k] = p
	}
	return plans, nil
}

// loadPlan plans model (ConfigDir/model.json) with opts. A model with no
// config file gets an error that lists the models there are.
func (c Config) loadPlan(model string, opts arena.Options) (*arena.Plan, error) {
	path := filepath.Join(c.ConfigDir, model+".json")
	cfg, err := arena.LoadConfig(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("bench: model %q: no %s (the models in %s: %s)", model, path, c.ConfigDir, c.configNames())
	}
	if err != nil {
		return nil, fmt.Errorf("bench: model %q: %w", model, err)
	}
	p, err := arena.PlanFor(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("bench: model %q at max_batch_tokens %d: %w", model, opts.MaxBatchTokens, err)
	}
	return p, nil
}

// configNames names the config files in ConfigDir, without .json.
func (c Config) configNames() string {
	entries, err := os.ReadDir(c.ConfigDir)
	if err != nil {
		return "none readable: " + err.Error()
	}
	var names []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".json"); ok && !e.IsDir() {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
