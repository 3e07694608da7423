// Package memsvg draws a device's memory to scale as SVG: one bar per
// device (weights, arena buffers and slabs, the KV cache by its blocks'
// states, the embedder's allocations, the reserve, other processes, free),
// or one bar of an arena's buffers. The server's /debug/memory page embeds
// the bar (Inline) and arenactl's plan --svg and fit --svg write the same
// bars as a standalone file (WriteDocument), so both draw one picture.
// PyTorch's memory visualizer (torch.cuda.memory._dump_snapshot and
// pytorch.org/memory_viz) is the model for what a reader wants to see: the
// big blocks at a glance, exact bytes on hover.
package memsvg
