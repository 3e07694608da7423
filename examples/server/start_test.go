package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// A server started with --config serves without weights; it warns when
// the model's weights would not fit the device (Llama-3.1-8B's 16 GB on a
// 12 GiB device), and only then. Each is shut down before it serves, as a
// signal at start-up would: serve then returns at once, and every byte is
// freed (serve used to make the HTTP server and start the engine, so such
// a shutdown left serve running and the engine's close waiting forever).
func TestConfigWithoutWeightsWarnsWhenTheModelWouldNotFit(t *testing.T) {
	for _, c := range []struct {
		config string
		bytes  int64
		warns  bool
	}{
		{"../configs/llama-3.1-8b.json", 12 << 30, true},
		{"../configs/qwen3-0.6b.json", gpuworker.H200Bytes, false},
	} {
		var logged bytes.Buffer
		st := settings{config: c.config, utilization: 0.9, opts: arena.Options{MaxBatchTokens: 256, MaxSeqLen: 256},
			backend: gpuworker.BackendConfig{Kind: gpuworker.KindHostSim, HostSim: gpuworker.HostSimConfig{Name: "hostsim", TotalBytes: c.bytes}}}
		s, err := start(context.Background(), st, slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn})))
		if err != nil {
			t.Fatalf("%s: %v", c.config, err)
		}
		// Shut down before serving, as a signal at start-up does: serve
		// then returns at once.
		if err := s.shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.serve(ln); err != nil {
			t.Fatalf("serve after shutdown: %v, want nil", err)
		}
		if s.released.CurrentBytes != 0 || s.released.Frees != s.released.Allocations {
			t.Errorf("%s: the ledger after shutdown: %+v, want everything freed", c.config, s.released)
		}
		if got := strings.Contains(logged.String(), "the model would not fit this device"); got != c.warns {
			t.Errorf("%s on %d B: warned %v, want %v; log:\n%s", c.config, c.bytes, got, c.warns, logged.String())
		}
	}
}
