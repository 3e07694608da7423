package checkpoint

import (
	"testing"
)

// BenchmarkOpen opens a four-shard Llama-shaped checkpoint of 291 tensors
// (32 layers) through its index: the cost of checking every header, which
// does not depend on the tensors' sizes (the data is never read). Reported:
// time and allocations per Open+Close, and header bytes parsed per second.
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	m, err := Write(dir, llamaSpecs(32), WriteOptions{Seed: 1, ShardBytes: 650_000})
	if err != nil {
		b.Fatal(err)
	}
	if len(m.Files) != 4 || len(m.Checksums) != 291 {
		b.Fatalf("%d shards, %d tensors; want 4, 291", len(m.Files), len(m.Checksums))
	}
	c, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	var headerBytes int64
	for _, s := range c.Shards() {
		headerBytes += s.DataOffset
	}
	if err := c.Close(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(headerBytes)
	b.ReportAllocs()
	for b.Loop() {
		c, err := Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		if c.Len() != 291 {
			b.Fatalf("%d tensors", c.Len())
		}
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
