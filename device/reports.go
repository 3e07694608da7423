package device

import "time"

// Stats says how the GPU worker has run.
type Stats struct {
	// ThreadIDs are the distinct thread ids (gpuworker.ThreadID: the OS
	// thread id on Linux) that ran the GPU actor's messages: one, plus one
	// for each takeover. They never ran at the same time: a thread takes
	// over only once the one before it ended.
	ThreadIDs []int
	// Takeovers counts the fresh GPU threads that took over after
	// runtime.Goexit ended the one before (a forward step calling t.FailNow,
	// for example).
	Takeovers int64
	// Messages is the number of requests the GPU actor handled.
	Messages uint64
	// Backend names the backend ("hostsim", "cuda").
	Backend string
}

// ReleaseReport says what a release freed: Freed allocations holding Bytes
// bytes (a pooled arena is one allocation, each slab one), in Duration. A
// second release frees nothing more.
type ReleaseReport struct {
	// Freed is the number of allocations freed.
	Freed int
	// Bytes is the bytes they held.
	Bytes int64
	// Duration is how long the release took, from its start on the release
	// supervisor to its last free.
	Duration time.Duration
}
