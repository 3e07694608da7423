package checkpoint

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// llamaSpecs is a Llama-shaped tensor list with the names and order of
// transformers' LlamaForCausalLM state dict (modeling_llama.py: the decoder
// layer registers self_attn, mlp, input_layernorm, post_attention_layernorm
// in that order), small dimensions: hidden 64, 4 query heads and 2 KV heads
// of 16, intermediate 128, vocabulary 256, all BF16.
func llamaSpecs(layers int) []TensorSpec {
	const hidden, kv, inter, vocab = 64, 32, 128, 256
	specs := []TensorSpec{{"model.embed_tokens.weight", BF16, []int64{vocab, hidden}}}
	for l := range layers {
		p := "model.layers." + strconv.Itoa(l) + "."
		specs = append(specs,
			TensorSpec{p + "self_attn.q_proj.weight", BF16, []int64{hidden, hidden}},
			TensorSpec{p + "self_attn.k_proj.weight", BF16, []int64{kv, hidden}},
			TensorSpec{p + "self_attn.v_proj.weight", BF16, []int64{kv, hidden}},
			TensorSpec{p + "self_attn.o_proj.weight", BF16, []int64{hidden, hidden}},
			TensorSpec{p + "mlp.gate_proj.weight", BF16, []int64{inter, hidden}},
			TensorSpec{p + "mlp.up_proj.weight", BF16, []int64{inter, hidden}},
			TensorSpec{p + "mlp.down_proj.weight", BF16, []int64{hidden, inter}},
			TensorSpec{p + "input_layernorm.weight", BF16, []int64{hidden}},
			TensorSpec{p + "post_attention_layernorm.weight", BF16, []int64{hidden}},
		)
	}
	return append(specs,
		TensorSpec{"model.norm.weight", BF16, []int64{hidden}},
		TensorSpec{"lm_head.weight", BF16, []int64{vocab, hidden}},
	)
}

// rawFile is a safetensors file: the 8-byte length of header, header, then
// data bytes 0, 1, 2, ... (mod 251).
func rawFile(header string, data int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	for i := range data {
		b = append(b, byte(i%251))
	}
	return b
}

// withLength is rawFile's bytes with the 8-byte length replaced by n.
func withLength(b []byte, n uint64) []byte {
	out := append([]byte(nil), b...)
	binary.LittleEndian.PutUint64(out, n)
	return out
}

// writeTemp writes data to dir/name and returns the path.
func writeTemp(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// wantError checks that err is an *Error of kind sentinel naming file and
// tensor, and returns it.
func wantError(t testing.TB, err, sentinel error, file, tensor string) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %v", sentinel)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T %v is not a *checkpoint.Error", err, err)
	}
	if !errors.Is(err, sentinel) || e.Err != sentinel {
		t.Fatalf("error %v: kind %v, want %v", err, e.Err, sentinel)
	}
	if e.File != file {
		t.Errorf("error %v: File %q, want %q", err, e.File, file)
	}
	if e.Tensor != tensor {
		t.Errorf("error %v: Tensor %q, want %q", err, e.Tensor, tensor)
	}
	if e.Reason == "" {
		t.Errorf("error %v has no Reason", err)
	}
	return e
}

// openFDs counts this process's open file descriptors, or returns -1 where
// /proc/self/fd does not exist.
func openFDs(t testing.TB) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(entries) - 1 // the descriptor ReadDir itself held
}

// noFDLeak runs f and fails when it leaves more descriptors open than it
// found (on Linux; elsewhere it just runs f).
func noFDLeak(t testing.TB, f func()) {
	t.Helper()
	before := openFDs(t)
	f()
	if after := openFDs(t); after != before {
		t.Errorf("open file descriptors: %d before, %d after", before, after)
	}
}
