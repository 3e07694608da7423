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
// (stepTiming.overhead: Schedule through the KV cache actor, whose reply
// brings the batch's block tables, the Forward round trip to the GPU
// thread, Commit, and handing the step's events to the deliverer; not the
// stand-in model's forward) with 256 sequences decoding, over Qwen3-0.6B's
// config on a simulated H200: every round trip the server makes per step.
// The deliverer runs, as in the server, on its own goroutine. A finished
// sequence is replaced at once, so a few steps also admit a 32-token
// prompt. It reports the overhead's p50 and p99 per step (target ≤ 100
// µs) and the forward's p50 beside it.
//
//	go test ./examples/server -run '^$' -bench SchedulerOverhead -count 3
func BenchmarkSchedulerOverhead(b *testing.B) {
	st := settings{config: "../configs/qwen3-0.6b.json", utilization: 0.9, kvBlocks: overheadBatch * 80,
		opts:    arena.Options{MaxBatchTokens: 8192, MaxSeqLen: 1280, MaxBatchSize: overheadBatch},
		backend: gpuworker.BackendConfig{Kind: gpuworker.KindHostSim, HostSim: gpuworker.HostSimConfig{Name: "hostsim H200", TotalBytes: gpuworker.H200Bytes}}}
	s, err := start(context.Background(), st, slog.New(slog.DiscardHandler))
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
		if _, err := e.step(ctx); err != nil {
			b.Fatal(err)
		}
	}
	overhead := make([]time.Duration, 0, 1024)
	device := make([]time.Duration, 0, 1024)
	for b.Loop() {
		t, err := e.step(ctx)
		if err != nil {
			b.Fatal(err)
		}
		overhead, device = append(overhead, t.overhead()), append(device, t.device)
		for e.sched.Running()+e.sched.Waiting() < overheadBatch {
			add()
		}
	}
	b.ReportMetric(float64(percentile(overhead, 50).Nanoseconds()), "p50-overhead-ns/step")
	b.ReportMetric(float64(percentile(overhead, 99).Nanoseconds()), "p99-overhead-ns/step")
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
