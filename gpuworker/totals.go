package gpuworker

import "github.com/gpuarena/gpuarena/device"

// LedgerTotals returns the ledger's counters and per-owner usage (no
// entries; BackendBytesInUse -1) as of the last request the GPU thread
// finished that changed them, published before that request's answer, with
// Taken the time it published them. It
// never waits for the GPU thread, so a metrics scrape does not stall behind
// a long forward step or a queue of them; Ledger is the exact, waiting
// snapshot. The result must not be modified.
func (w *Worker) LedgerTotals() device.Ledger { return *w.status.totals.Load() }
