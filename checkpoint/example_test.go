package checkpoint_test

import (
	"fmt"
	"io"
	"log"
	"os"

	"github.com/gpuarena/gpuarena/checkpoint"
)

// Write a small two-shard checkpoint, open it, and read one tensor's bytes
// back: they hash to what the generator wrote.
func Example() {
	dir, err := os.MkdirTemp("", "checkpoint-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	m, err := checkpoint.Write(dir, []checkpoint.TensorSpec{
		{Name: "model.embed_tokens.weight", DType: checkpoint.BF16, Shape: []int64{128, 64}},
		{Name: "model.norm.weight", DType: checkpoint.BF16, Shape: []int64{64}},
		{Name: "lm_head.weight", DType: checkpoint.BF16, Shape: []int64{128, 64}},
	}, checkpoint.WriteOptions{Seed: 1, ShardBytes: 20_000})
	if err != nil {
		log.Fatal(err)
	}

	c, err := checkpoint.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Println(len(c.Shards()), "shards,", c.Len(), "tensors,", c.TotalBytes(), "bytes")
	for _, t := range c.Tensors() {
		fmt.Println(t.Name, t.DType, t.Shape, t.Bytes)
	}

	r, err := c.Section("lm_head.weight")
	if err != nil {
		log.Fatal(err)
	}
	h := checkpoint.NewHash()
	if _, err := io.Copy(h, r); err != nil {
		log.Fatal(err)
	}
	fmt.Println("bytes match the generator:", h.Sum32() == m.Checksums["lm_head.weight"])
	// Output:
	// 2 shards, 3 tensors, 32896 bytes
	// model.embed_tokens.weight BF16 [128 64] 16384
	// model.norm.weight BF16 [64] 128
	// lm_head.weight BF16 [128 64] 16384
	// bytes match the generator: true
}
