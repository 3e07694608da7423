#!/usr/bin/env bash
# compute-validation.sh: the GPU validation of compute in a forward step
# (modules, launches, streams, events, device faults), on a machine with an
# NVIDIA GPU and driver but no Go. It runs the binaries
# scripts/build-cuda.sh built (gpuworker.test, arenactl) from BIN, writes
# one log per check to OUTDIR, prints a PASS or FAIL line per check and
# exits 1 when any failed.
#
#   scripts/compute-validation.sh BIN OUTDIR
#
# Checks:
#   conformance   the compute conformance suite on cuda (the same PTX,
#                 launches and BF16 tolerances as hostsim), the raw-handle
#                 escape hatch, and a faulting kernel in a child process
#                 (ErrDeviceFault, Err, later requests refused, Stop returns)
#   launch        BenchmarkCUDALaunchOverhead: a launch from inside a step
#                 against the same cuLaunchKernel call on a locked thread;
#                 PASS when the median step/direct of 5 runs is ≤ 1.05
#   decode-step   BenchmarkCUDADecodeStep: 720 launches per step through
#                 Manager.Forward against direct (reported, no target)
#   graph         CUDA graphs: the conformance suite's graph case (RMSNorm
#                 + residual add captured once, replayed, byte for byte
#                 equal to the direct launches; refused calls; failed
#                 captures leave nothing) and the raw handles refused in a
#                 capture
#   graph-step    BenchmarkCUDAGraphDecodeStep: the 720 launches replayed
#                 as one captured graph through Manager.Forward, against
#                 launched one by one through it and direct; PASS when the
#                 median replay is faster than the median launch by launch
#   run-<model>   arenactl run --model on cuda with a generated model:
#                 every step runs RMSNorm and the residual add and checks
#                 them against the Go references (invariants hold, and
#                 compute_steps equals the steps)
#   graphs-<model> the same with --cuda-graphs: odd steps replay the
#                 kernels as a captured graph, even steps launch them;
#                 the per-step GPU and kernels' wall times of both
set -uo pipefail
bin=$(realpath "${1:?usage: compute-validation.sh BIN OUTDIR}")
mkdir -p "${2:?usage: compute-validation.sh BIN OUTDIR}"
out=$(realpath "$2")
cd "$(dirname "$0")/.."
status=0
pass() { echo "PASS $1${2:+: $2}"; }
fail() { echo "FAIL $1${2:+: $2}"; status=1; }

# 1. Tests, in the package's folder as go test would run them.
log=$out/conformance.log
if (cd gpuworker && "$bin/gpuworker.test" -test.v -test.count=1 -test.timeout=600s \
	-test.run '^(TestComputeConformanceCUDA|TestComputeConformanceHostSim|TestCUDAKernelFault|TestCUDAStepHandles|TestCUDAGraphCaptureRefusesRawHandles)$') >"$log" 2>&1; then
	pass conformance "$(grep -c '^--- PASS' "$log") tests passed; $(grep -h 'BF16 ulps' "$log" | sed 's/^ *//' | head -n 6 | paste -sd';' -)"
else
	fail conformance "see $log: $(grep -E '^(--- FAIL|FAIL|panic)' "$log" | head -n 3 | paste -sd';' -)"
fi

# 2. Launch overhead: the median of 5 runs' step/direct.
log=$out/launch-overhead.txt
if (cd gpuworker && "$bin/gpuworker.test" -test.run '^$' -test.bench '^BenchmarkCUDALaunchOverhead$' \
	-test.benchtime 100000x -test.count 5) >"$log" 2>&1; then
	ratio=$(grep -o '[0-9.]* step/direct' "$log" | awk '{print $1}' | sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]}')
	direct=$(grep -o '[0-9.]* direct-ns/launch' "$log" | awk '{print $1}' | sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]}')
	step=$(grep -o '[0-9.]* step-ns/launch' "$log" | awk '{print $1}' | sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]}')
	if [[ -n $ratio ]] && awk -v r="$ratio" 'BEGIN {exit !(r <= 1.05)}'; then
		pass launch "median step/direct $ratio (direct $direct ns, step $step ns per launch; target ≤ 1.05)"
	else
		fail launch "median step/direct ${ratio:-none} (direct $direct ns, step $step ns per launch; target ≤ 1.05)"
	fi
else
	fail launch "the benchmark failed; see $log"
fi

# 3. A decode-shaped step: 720 launches, through the manager and direct.
log=$out/decode-step.txt
if (cd gpuworker && "$bin/gpuworker.test" -test.run '^$' -test.bench '^BenchmarkCUDADecodeStep$' \
	-test.benchtime 300x -test.count 3) >"$log" 2>&1; then
	d=$(grep 'DecodeStep/direct' "$log" | awk '{print $3}' | sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]}')
	m=$(grep 'DecodeStep/manager' "$log" | awk '{print $3}' | sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]}')
	pass decode-step "720 launches per step: direct ${d:-?} ns, Manager.Forward ${m:-?} ns ($(awk -v d="$d" -v m="$m" 'BEGIN {if (d > 0) printf "%.3f×", m / d}'))"
else
	fail decode-step "the benchmark failed; see $log"
fi

# 4. CUDA graphs: the conformance suite's graph case and the raw handles.
log=$out/graph.log
if (cd gpuworker && "$bin/gpuworker.test" -test.v -test.count=1 -test.timeout=600s \
	-test.run '^(TestComputeConformanceCUDA|TestCUDAGraphCaptureRefusesRawHandles)$/^(Graph|Unload)$') >"$log" 2>&1 &&
	grep -q -- '--- PASS: TestComputeConformanceCUDA/Graph ' "$log"; then
	pass graph "$(grep -c -- '--- PASS' "$log") tests passed; $(grep -h 'replayed' "$log" | sed 's/^ *//' | head -n 1)"
else
	fail graph "see $log: $(grep -E -- '(--- FAIL|^FAIL|panic)' "$log" | head -n 3 | paste -sd';' -)"
fi

# 5. A decode-shaped step replayed as one graph, against launch by launch.
log=$out/graph-step.txt
if (cd gpuworker && "$bin/gpuworker.test" -test.run '^$' -test.bench '^BenchmarkCUDAGraphDecodeStep$' \
	-test.benchtime 300x -test.count 3) >"$log" 2>&1; then
	med() { grep -E "GraphDecodeStep/$1(-[0-9]+)?[[:space:]]" "$log" | awk '{print $3}' | sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]}'; }
	d=$(med direct) m=$(med manager) g=$(med graph) dg=$(med direct-graph)
	line="720 launches per step: direct ${d:-?} ns, Manager.Forward ${m:-?} ns, graph through Manager.Forward ${g:-?} ns ($(awk -v g="$g" -v m="$m" 'BEGIN {if (m > 0) printf "%.3f× launch by launch", g / m}')), graph direct ${dg:-?} ns"
	if [[ -n $g && -n $m ]] && awk -v g="$g" -v m="$m" 'BEGIN {exit !(g < m)}'; then
		pass graph-step "$line"
	else
		fail graph-step "$line (want the replay faster)"
	fi
else
	fail graph-step "the benchmark failed; see $log"
fi

# 6. arenactl run --model on cuda: a plain-weight model (Llama) and an
# offset-weight one (Gemma 3), generated here.
for model in tiny-llama tiny-gemma3; do
	dir=$out/model-$model
	rm -rf "$dir"
	log=$out/run-$model.json
	if ! "$bin/arenactl" gen-model --config "internal/modelgen/testdata/$model.json" --out "$dir" >"$out/gen-$model.log" 2>&1; then
		fail "run-$model" "gen-model failed; see $out/gen-$model.log"
		continue
	fi
	"$bin/arenactl" run --backend cuda --model "$dir" --steps 200 --clients 8 --json >"$log" 2>"$out/run-$model.stderr"
	rc=$?
	steps=$(sed -n 's/.*"compute_steps": *\([0-9]*\).*/\1/p' "$log")
	ulps=$(sed -n 's/.*"compute_max_ulps": *\([0-9]*\).*/\1/p' "$log")
	gpu=$(sed -n 's/.*"step_gpu_p50_us": *\([0-9.]*\).*/\1/p' "$log")
	wall=$(sed -n 's/.*"step_p50_us": *\([0-9.]*\).*/\1/p' "$log")
	if [[ $rc == 0 && $steps == 200 ]]; then
		pass "run-$model" "200 steps checked, max $ulps BF16 ulps; step p50 wall $wall µs, GPU $gpu µs"
	else
		fail "run-$model" "exit $rc, compute_steps ${steps:-none}; see $log and $out/run-$model.stderr"
	fi
	log=$out/graphs-$model.json
	"$bin/arenactl" run --backend cuda --model "$dir" --steps 200 --clients 8 --cuda-graphs --json >"$log" 2>"$out/graphs-$model.stderr"
	rc=$?
	field() { sed -n "s/.*\"$1\": *\([0-9.]*\).*/\1/p" "$log"; }
	steps=$(field compute_steps) gsteps=$(field graph_steps)
	if [[ $rc == 0 && $steps == 200 && $gsteps == 100 ]]; then
		pass "graphs-$model" "200 steps checked, 100 replayed a graph; per step GPU p50 $(field step_gpu_p50_us) µs launched, $(field graph_step_gpu_p50_us) µs replayed; kernels' wall p50 $(field step_kernels_wall_p50_us) µs launched, $(field graph_step_kernels_wall_p50_us) µs replayed"
	else
		fail "graphs-$model" "exit $rc, compute_steps ${steps:-none}, graph_steps ${gsteps:-none}; see $log and $out/graphs-$model.stderr"
	fi
	rm -rf "$dir"
done
exit $status
