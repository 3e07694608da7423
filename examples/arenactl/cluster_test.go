package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/internal/node"
	"github.com/gpuarena/gpuarena/internal/nodepb"
	"github.com/gpuarena/gpuarena/internal/testkit"
	"github.com/gpuarena/gpuarena/internal/testkit/simgroup"
)

// nodeThrottleGoroutines are the goroutines a node started in the test
// process (TestClusterCommandsOnANode) leaves after Close: protoactor-go's
// throttles (actor/throttler.go, NewThrottle) start one at the first event
// of each period and it waits out the period, 60 s for the gossiper's
// (cluster/gossiper.go, StartGossiping), whatever Shutdown does. They end
// on their own; goleak ignores exactly them (names as the compiler gives
// them where NewThrottle is inlined; internal/node's nodeProcessLeaks lists
// the same).
var nodeThrottleGoroutines = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
	goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/cluster.(*Gossiper).StartGossiping.NewThrottle.func3.1"),
	goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/cluster.NewGossipActor.NewThrottleWithLogger.func2.1"),
}

func TestClusterRefusesBadFlagsBeforeConnecting(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cluster", "inventory"}, "--cluster: the address"},
		{[]string{"cluster", "inventory", "--cluster", "7700"}, "--cluster \"7700\""},
		{[]string{"cluster", "inventory", "--cluster", "127.0.0.1:7700", "--client-listen", "nohost"}, "--client-listen \"nohost\""},
		{[]string{"cluster", "inventory", "--cluster", "127.0.0.1:7700", "--timeout", "0s"}, "--timeout 0s"},
		{[]string{"cluster", "reserve", "--cluster", "127.0.0.1:7700", "--bytes", "1GiB"}, "--key"},
		{[]string{"cluster", "reserve", "--cluster", "127.0.0.1:7700", "--key", "k"}, "--bytes"},
		{[]string{"cluster", "reserve", "--cluster", "127.0.0.1:7700", "--key", "k", "--bytes", "1GiB", "--node", "x"}, "--node \"x\""},
		{[]string{"cluster", "release", "--cluster", "127.0.0.1:7700"}, "--key"},
		{[]string{"place", "--config", configPath("llama-3.1-8b"), "--cluster", "127.0.0.1:7700", "--devices", "2xh200"}, "--devices: not carried"},
		{[]string{"place", "--config", configPath("llama-3.1-8b"), "--cluster", "127.0.0.1:7700", "--kv-cache-dtype", "int3"}, "--kv-cache-dtype"},
		{[]string{"cluster", "inventory", "--cluster", "127.0.0.1:7700", "--tls-ca", "ca.pem"}, "a certificate and its key are both needed"},
		{[]string{"place", "--config", configPath("llama-3.1-8b"), "--cluster", "127.0.0.1:7700", "--tls-cert", "/nonexistent/c.pem", "--tls-key", "/nonexistent/k.pem"}, "/nonexistent/c.pem"},
		{[]string{"place", "--config", configPath("llama-3.1-8b"), "--cluster", "nohost"}, "--cluster \"nohost\""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := cli(t, tc.args...)
			if r.code != exitFailure || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and stderr naming %s", r.code, r.stdout, r.stderr, exitFailure, tc.want)
			}
		})
	}
}

// TestClusterTimeoutSaysWhatTLSNeeds: a timeout of a command without the
// TLS flags says that nodes on TLS answer only clients with them; with
// the flags, or another error, nothing is added.
func TestClusterTimeoutSaysWhatTLSNeeds(t *testing.T) {
	timeout := fmt.Errorf("node 127.0.0.1:7700: ClusterInventoryRequest: %w", actor.ErrTimeout)
	plain := clusterFlags{timeout: time.Second}
	if err := plain.explain(timeout); !errors.Is(err, actor.ErrTimeout) || !strings.Contains(err.Error(), "--tls-cert and --tls-key") {
		t.Fatalf("timeout without TLS flags: %v; want the TLS hint, still matching ErrTimeout", err)
	}
	withTLS := clusterFlags{timeout: time.Second, tls: tlsFlags{Cert: "c.pem", Key: "k.pem"}}
	if err := withTLS.explain(timeout); err != timeout {
		t.Fatalf("timeout with TLS flags: %v, want it unchanged", err)
	}
	other := errors.New("refused")
	if err := plain.explain(other); err != other {
		t.Fatalf("another error: %v, want it unchanged", err)
	}
}

// startLocalNode starts a node of two simulated H100s alone in a static
// cluster on a loopback port, closed when the test ends, and returns it
// with a client sending from its own actor system (one remote in the test
// process: remote.Start sets gRPC's process-wide logger). It skips the
// test under -short.
func startLocalNode(t *testing.T) (*node.Node, *node.Client) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a node (protoactor-go sleeps 3 s in start and stop)")
	}
	group := simgroup.Open(t, simgroup.Machine(t, "2xh100-80gb"))
	n, err := node.Start(node.Config{Listen: "127.0.0.1:0", Provider: node.Static(time.Second, time.Second), Devices: group,
		GossipInterval: 50 * time.Millisecond, Logger: testkit.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() }) // before the group's close, which simgroup.Open registered first
	return n, n.Client(10 * time.Second)
}

// TestClusterCommandsOnANode runs the cluster subcommands' and place
// --cluster's work against a node in the test process.
func TestClusterCommandsOnANode(t *testing.T) {
	n, client := startLocalNode(t)
	addr := n.Self().Address
	ctx := context.Background()
	c := &clusterCmd{app: &app{logger: testkit.Discard}, conn: clusterFlags{cluster: addr}, node: addr,
		key: "job-1", device: 1, bytes: byteSize(512 << 20), ttl: time.Minute}

	var out bytes.Buffer
	if err := c.reserve(ctx, client, &out); err != nil {
		t.Fatal(err)
	}
	if want := `reserved "job-1" on ` + addr + " device 1: 536870912 B (512.00 MiB)"; !strings.HasPrefix(out.String(), want) {
		t.Fatalf("reserve printed %q, want it to start with %q", out.String(), want)
	}
	// The reservation shows in the inventory (the node's own gossip state).
	testkit.Eventually(t, 10*time.Second, "the reservation in the inventory", func() error {
		out.Reset()
		c.jsonOut = true
		if err := c.inventory(ctx, client, &out); err != nil {
			return err
		}
		var invs []*nodepb.Inventory
		if err := json.Unmarshal(out.Bytes(), &invs); err != nil {
			return err
		}
		if len(invs) != 1 || len(invs[0].GetDevices()) != 2 || len(invs[0].GetDevices()[1].GetOwners()) != 1 ||
			invs[0].GetDevices()[1].GetOwners()[0].GetBytes() != 512<<20 {
			return errors.New("inventory without the reservation: " + out.String())
		}
		return nil
	})

	// A reserve past the budget is refused with the typed error.
	big := *c
	big.key, big.bytes = "job-2", byteSize(1<<40)
	if err := big.reserve(ctx, client, &out); !errors.Is(err, gpuarena.ErrOutOfMemory) {
		t.Fatalf("reserve of 1 TiB: %v, want ErrOutOfMemory", err)
	}

	// Placement from the node's view, through its placement grain:
	// Llama-3.1-8B fits one H100, and an fp8 KV cache (carried with the
	// request) holds twice the tokens.
	llama, err := os.ReadFile(configPath("llama-3.1-8b"))
	if err != nil {
		t.Fatal(err)
	}
	pc := &placeCmd{fit: fitCmd{app: c.app}, cluster: clusterFlags{cluster: addr}}
	pc.fit.plan.config = configPath("llama-3.1-8b")
	out.Reset()
	if err := pc.placeOnCluster(ctx, client, &out, "llama", &nodepb.PlaceRequest{ConfigJson: llama}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "as "+addr+" sees it") || !strings.Contains(out.String(), addr+" [0]") {
		t.Fatalf("place --cluster printed:\n%s\nwant a layout on %s device 0, answered by it", out.String(), addr)
	}
	kvTokens := func(kvDType string) int64 {
		t.Helper()
		req, err := node.PlaceRequestFor(llama, arena.Options{KVCacheDType: arena.KVCacheDType(kvDType)}, arena.FitOptions{}, node.PlaceOptions{TensorParallelSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		pc.fit.jsonOut = true
		out.Reset()
		if err := pc.placeOnCluster(ctx, client, &out, "llama", req); err != nil {
			t.Fatal(err)
		}
		var got clusterPlaceJSON
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if got.AnsweredBy.GetAddress() != addr || len(got.Placements) == 0 {
			t.Fatalf("place --cluster --json: %s; want placements answered by %s", out.String(), addr)
		}
		return got.Placements[0].GetKvTokens()
	}
	if auto, fp8 := kvTokens("auto"), kvTokens("fp8"); fp8 < 2*auto-2*16 || fp8 > 2*auto+2*16 {
		t.Fatalf("KV tokens with kv_cache_dtype fp8: %d, want about twice auto's %d", fp8, auto)
	}

	// Release, then release again: the second is a negative answer.
	c.jsonOut = false
	out.Reset()
	if err := c.release(ctx, client, &out); err != nil || out.String() != `released "job-1" on `+addr+"\n" {
		t.Fatalf("release: %v, printed %q", err, out.String())
	}
	var se *statusError
	if err := c.release(ctx, client, &out); !errors.As(err, &se) || se.code != exitNegative {
		t.Fatalf("second release: %v, want a negative answer", err)
	}
}
