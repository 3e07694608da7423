// Package bench measures gpuarena's dispatch, arena build and slab carve
// against its peers, on the same machine and in the same run. It is the one
// measurement harness behind both the `go test -bench` benchmarks (in the
// packages they measure) and `arenactl bench` (which runs on a machine
// without Go, such as the GPU host). It is internal: only gpuarena's own
// benchmarks and arenactl import it.
//
// The subjects of the dispatch and contention suites (Target) are four ways
// of reaching the one OS thread that owns the device, and an experiment:
//
//   - direct: the backend called on its own locked thread, the floor;
//   - chan-worker: a goroutine locked to its thread reading functions from an
//     unbuffered channel and answering on another, the pattern of
//     gorgonia.org/cu's Ctx.Do (copied, not imported);
//   - protoactor-naive: a protoactor-go actor on a naive pinned dispatcher
//     (Schedule sends the function over an unbuffered channel to a locked
//     goroutine, no spin) with the default mailbox;
//   - gpuarena: gpuworker.Worker, the GPU actor on its pinned dispatcher,
//     at each spin asked for (0: every round trip parks both sides).
//
// The build suite compares Manager.BuildArena and Release with the same
// driver calls made directly on a locked thread (ActorBuild, DirectBuild);
// the carve suite, Manager.CarveSlab with the carve's arithmetic. Run runs
// the suites (Config, DefaultConfig) and returns their rows (Report, Row).
//
// Every measured operation's duration is recorded (time.Now deltas into
// preallocated slices) and summarised as p50, p99, mean and operations per
// second (Summary). Nothing here asserts a time: it measures.
package bench
