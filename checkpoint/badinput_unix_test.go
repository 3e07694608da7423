//go:build unix

package checkpoint

import (
	"path/filepath"
	"syscall"
	"testing"
)

// TestNamedPipe: a FIFO where a checkpoint file should be is refused from
// its metadata, without opening it (which would block), and without
// leaving a descriptor open.
func TestNamedPipe(t *testing.T) {
	p := filepath.Join(t.TempDir(), "model.safetensors")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skip(err)
	}
	noFDLeak(t, func() {
		_, err := Open(p)
		wantError(t, err, ErrNotRegularFile, p, "")
	})
}
