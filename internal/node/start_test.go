package node

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/testkit"
)

// TestStartWarnsOfPlaintextBeyondLoopback starts nodes whose provider
// fails (so nothing listens) and checks the warning a node logs before it
// binds: plaintext beyond loopback only.
func TestStartWarnsOfPlaintextBeyondLoopback(t *testing.T) {
	mc, err := gpuworker.ParseMachine("1")
	if err != nil {
		t.Fatal(err)
	}
	sim, err := gpuworker.NewHostSimMachine(mc)
	if err != nil {
		t.Fatal(err)
	}
	group, err := gpuarena.NewGroup(gpuarena.WithDeviceFactories(sim.Factories()...), gpuarena.WithRankOptions(gpuarena.WithLogger(testkit.Discard)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := group.Close(); err != nil {
			t.Error(err)
		}
	})
	errNoProvider := errors.New("no provider in this test")
	for _, tc := range []struct {
		listen string
		tls    bool
		warns  bool
	}{
		{"192.0.2.1:7700", false, true},
		{"[2001:db8::1]:7700", false, true},
		{"node-7.example:7700", false, true},
		{"192.0.2.1:7700", true, false},
		{"127.0.0.1:7700", false, false},
		{"[::1]:7700", false, false},
		{"localhost:7700", false, false},
	} {
		var out bytes.Buffer
		cfg := Config{Listen: tc.listen, Devices: group, Logger: slog.New(slog.NewTextHandler(&out, nil)),
			Provider: func() (cluster.ClusterProvider, error) { return nil, errNoProvider }}
		if tc.tls {
			cfg.TLS = &Credentials{}
		}
		if _, err := Start(cfg); !errors.Is(err, errNoProvider) {
			t.Fatalf("%s: Start: %v, want the provider's error", tc.listen, err)
		}
		if warned := strings.Contains(out.String(), "level=WARN") && strings.Contains(out.String(), "plaintext"); warned != tc.warns {
			t.Errorf("listen %s, tls %v: warned %v, want %v (log %q)", tc.listen, tc.tls, warned, tc.warns, out.String())
		}
	}
}
