//go:build unix

package arena

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestLoadConfigRefusesFIFO: a named pipe is refused from its metadata. The
// old reader opened it and blocked until a writer came; should LoadConfig
// block, the test opens the pipe for writing to let it go, then fails.
func TestLoadConfigRefusesFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "config.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	link := filepath.Join(t.TempDir(), "link.json")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{"fifo": fifo, "symlink to a fifo": link, "folder whose config.json is a fifo": dir} {
		t.Run(name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := LoadConfig(path)
				done <- err
			}()
			select {
			case err := <-done:
				assertNotRegular(t, err, path, fifo, "a named pipe (FIFO), not a regular file")
			case <-time.After(10 * time.Second):
				if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
					w.Close()
				}
				<-done
				t.Fatalf("LoadConfig(%s) blocked on the named pipe", path)
			}
		})
	}
}

// TestLoadConfigRefusesDevices: /dev/zero is refused without reading it
// (the old reader read it until the kernel killed the process).
func TestLoadConfigRefusesDevices(t *testing.T) {
	const zero = "/dev/zero"
	if _, err := os.Stat(zero); err != nil {
		t.Skipf("%s: %v", zero, err)
	}
	_, err := LoadConfig(zero)
	assertNotRegular(t, err, zero, "a character device, not a regular file")
}

func TestLoadConfigRefusesSockets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Skipf("unix socket: %v", err)
	}
	defer l.Close()
	_, err = LoadConfig(path)
	assertNotRegular(t, err, path, "a socket, not a regular file")
}
