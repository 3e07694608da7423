package main

import (
	"encoding/json"
	"testing"

	"github.com/gpuarena/gpuarena/internal/modelgen"
)

// run --model --cuda-graphs captures the kernels once and alternates:
// even steps launch them, odd steps replay the graph, every step checked
// against the Go references; the graph and the module are gone before the
// release, so every invariant holds. Both the fixed steps and --kv.
func TestRunCUDAGraphs(t *testing.T) {
	gen := modelgen.ForTest(t, "../../internal/modelgen/testdata/tiny-llama.json", modelgen.Options{Seed: 5})
	for _, extra := range [][]string{nil, {"--kv", "--requests", "8", "--kv-blocks", "4096"}} {
		args := append([]string{"run", "--model", gen.Dir, "--json", "--steps", "30", "--clients", "3", "--cuda-graphs"}, extra...)
		r := cli(t, args...)
		var rep runReport
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("%v: %v\n%s", extra, err, r.stderr)
		}
		switch {
		case !rep.ComputeCUDAGraphs || rep.ComputeSteps == 0:
			t.Errorf("%v: compute_cuda_graphs %v, %d steps checked", extra, rep.ComputeCUDAGraphs, rep.ComputeSteps)
		case rep.GraphSteps != rep.ComputeSteps/2:
			t.Errorf("%v: %d of %d steps replayed the graph, want the odd ones, %d", extra, rep.GraphSteps, rep.ComputeSteps, rep.ComputeSteps/2)
		case rep.GraphStepGPUP50US <= 0 || rep.GraphStepKernelsWallP50US <= 0 || rep.StepKernelsWallP50US <= 0:
			t.Errorf("%v: graph GPU p50 %v µs, graph wall p50 %v µs, launches' wall p50 %v µs; want all > 0",
				extra, rep.GraphStepGPUP50US, rep.GraphStepKernelsWallP50US, rep.StepKernelsWallP50US)
		case len(rep.InvariantsFailed) != 0:
			t.Errorf("%v: invariants failed: %v", extra, rep.InvariantsFailed)
		}
	}
}
