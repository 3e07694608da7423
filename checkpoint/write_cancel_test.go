package checkpoint_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/gpuarena/gpuarena/checkpoint"
)

// A write whose context is done stops, returns the context's error and
// leaves no file in the folder, not even a temporary one.
func TestWriteContextCancelled(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	specs := []checkpoint.TensorSpec{{Name: "a.weight", DType: checkpoint.BF16, Shape: []int64{1024, 1024}}}
	if _, err := checkpoint.WriteContext(ctx, dir, specs, checkpoint.WriteOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("write with a cancelled context: %v, want context.Canceled", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("the folder holds %d entries after the cancelled write (%s …), want none", len(entries), entries[0].Name())
	}
}
