package node

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/gpuarena/gpuarena/internal/testkit/simgroup"
)

// TestStartWarnsOfPlaintextBeyondLoopback starts nodes whose provider
// fails (so nothing listens) and checks the warning a node logs before it
// binds: plaintext beyond loopback only.
func TestStartWarnsOfPlaintextBeyondLoopback(t *testing.T) {
	group := simgroup.Open(t, simgroup.Machine(t, "1"))
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
