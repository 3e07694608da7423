package main

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/examples/internal/serving"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// overheadBatch is the running sequences BenchmarkSchedulerOverhead keeps.
const overheadBatch = 256

// BenchmarkSchedulerOverhead measures the scheduler's own part of a step
// with 256 sequences decoding, over Qwen3-0.6B's config on a simulated
// H200: every round trip the server makes per step (the KV step through the
// KV cache actor, whose reply brings the batch's block tables; the Forward
// round trip to the GPU thread; Commit; handing the step's events to the
// deliverer, which runs on its own goroutine as in the server). Steps
// overlap as the server runs them (engine.tick): step N+1 is scheduled
// and queued while step N's forward runs. It reports, per step:
//
//   - p50/p99-overhead: stepTiming.exposed, how long the GPU thread waited
//     between one forward and the next — the overhead the device sees
//     (target ≤ 100 µs);
//   - p50/p99-sched: stepTiming.cpu, the engine's own time for a step
//     (scheduling, commit, delivery), which overlaps the forward before;
//   - p50-forward: the stand-in model's forward on the GPU thread.
//
// A finished sequence is replaced at once, so a few steps also admit a
// 32-token prompt.
//
//	go test ./examples/server -run '^$' -bench SchedulerOverhead -count 3
func BenchmarkSchedulerOverhead(b *testing.B) {
	st := settings{config: "../configs/qwen3-0.6b.json", utilization: 0.9, kvBlocks: overheadBatch * 80,
		opts:    arena.Options{MaxBatchTokens: 8192, MaxSeqLen: 1280, MaxBatchSize: overheadBatch},
		backend: gpuworker.BackendConfig{Kind: gpuworker.KindHostSim, HostSim: gpuworker.HostSimConfig{Name: "hostsim H200", TotalBytes: gpuworker.H200Bytes}}}
	s, err := newServer(context.Background(), st, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	e := s.engine // the loop is not started: the benchmark runs its steps
	e.out.start()
	defer func() {
		e.start() // the loop shutdown stops; it ends the live choices
		if err := s.shutdown(context.Background()); err != nil {
			b.Error(err)
		}
	}()
	n := 0
	add := func() {
		n++
		prompt := encode("the benchmark's prompt, request " + string(rune('a'+n%26)) + " of a batch")
		sub := &submission{reqs: []serving.LiveRequest{{Prompt: prompt[:32], MaxTokens: 1200}}, seeds: []uint64{uint64(n)},
			events: make(chan event, 1201), reply: make(chan error, 1)}
		e.take(sub)
		if err := <-sub.reply; err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	for range overheadBatch {
		add()
	}
	for e.sched.Running() < overheadBatch {
		if _, _, err := e.tick(ctx); err != nil {
			b.Fatal(err)
		}
	}
	var exposed, cpu, device []time.Duration
	for b.Loop() {
		t, ok, err := e.tick(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if ok {
			exposed, cpu, device = append(exposed, t.exposed), append(cpu, t.cpu), append(device, t.device)
		}
		for e.sched.Running()+e.sched.Waiting() < overheadBatch {
			add()
		}
	}
	b.ReportMetric(float64(percentile(exposed, 50).Nanoseconds()), "p50-overhead-ns/step")
	b.ReportMetric(float64(percentile(exposed, 99).Nanoseconds()), "p99-overhead-ns/step")
	b.ReportMetric(float64(percentile(cpu, 50).Nanoseconds()), "p50-sched-ns/step")
	b.ReportMetric(float64(percentile(cpu, 99).Nanoseconds()), "p99-sched-ns/step")
	b.ReportMetric(float64(percentile(device, 50).Nanoseconds()), "p50-forward-ns/step")
}

// percentile is d's nearest-rank p-th percentile (d is sorted in place).
func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[max((p*len(d)+99)/100-1, 0)]
}
