package vllmflags

import (
	"testing"

	"github.com/spf13/pflag"
)

// vLLM's names and underscores set the examples' flags.
func TestNormalize(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.SetNormalizeFunc(Normalize)
	seqLen := fs.Int64("max-seq-len", 0, "")
	tokens := fs.Int64("max-batch-tokens", 0, "")
	seqs := fs.Int64("max-batch-size", 0, "")
	block := fs.Int64("kv-block-size", 0, "")
	util := fs.Float64("gpu-memory-utilization", 0, "")
	err := fs.Parse([]string{"--max-model-len", "8192", "--max-num-batched-tokens=4096", "--max_num_seqs", "64",
		"--block-size", "32", "--gpu_memory_utilization", "0.8"})
	if err != nil {
		t.Fatal(err)
	}
	if *seqLen != 8192 || *tokens != 4096 || *seqs != 64 || *block != 32 || *util != 0.8 {
		t.Errorf("got max_seq_len %d, max_batch_tokens %d, max_batch_size %d, kv_block_size %d, utilization %v",
			*seqLen, *tokens, *seqs, *block, *util)
	}
	if err := fs.Parse([]string{"--max-num-partial-prefills", "2"}); err == nil {
		t.Error("a vLLM flag with no counterpart was accepted")
	}
}
