package actors

import "context"

// uncancelled is the context of the supervisors' own calls to the GPU
// worker: work a supervisor has started (a build, a rollback, a release, a
// carve's ledger record) always runs to its end and is always waited for,
// whatever the context of the request that started it, so nothing it
// allocates can be orphaned.
var uncancelled = context.Background()
