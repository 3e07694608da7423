package node

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/goleak"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// nodeChildEnv holds a childSpec (JSON) when the test binary runs as a
// node process of TestClusterOfThreeProcesses.
const nodeChildEnv = "GPUARENA_NODE_TEST_CHILD"

// childSpec is one node process: its gRPC and membership ports, the
// membership endpoints of all nodes, its simulated machine
// (gpuworker.ParseMachine), the provider's poll period and its TLS files
// (LoadCredentials). With Static the
// node joins with the Static provider (Seeds are then the nodes' gRPC
// addresses, MembershipPort unused), else with Automanaged.
type childSpec struct {
	GRPCPort, MembershipPort int
	Seeds                    []string
	Machine                  string
	Refresh                  time.Duration
	Static                   bool
	// TLS, when its Cert is set, are the node's TLS files.
	TLS TLSFiles
}

// runChild runs the node of the childSpec in nodeChildEnv until SIGTERM,
// prints "ready ADDRESS" on stdout once it has joined, and returns the exit
// status.
func runChild() int {
	var spec childSpec
	if err := json.Unmarshal([]byte(os.Getenv(nodeChildEnv)), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "child spec:", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	mc, err := gpuworker.ParseMachine(spec.Machine)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	machine, err := gpuworker.NewHostSimMachine(mc)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	group, err := gpuarena.NewGroup(gpuarena.WithDeviceFactories(machine.Factories()...),
		gpuarena.WithRankOptions(gpuarena.WithLogger(logger)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	provider := Automanaged("127.0.0.1", spec.MembershipPort, spec.Refresh, spec.Seeds...)
	if spec.Static {
		provider = Static(spec.Refresh, staticProbeTimeout, spec.Seeds...)
	}
	var creds *Credentials
	if spec.TLS.Cert != "" {
		if creds, err = LoadCredentials(spec.TLS); err != nil {
			fmt.Fprintln(os.Stderr, err)
			_ = group.Close()
			return 2
		}
	}
	n, err := Start(Config{
		Listen:          fmt.Sprintf("127.0.0.1:%d", spec.GRPCPort),
		TLS:             creds,
		Provider:        provider,
		Devices:         group,
		InventoryPeriod: 500 * time.Millisecond,
		LeaseCheck:      50 * time.Millisecond,
		GossipInterval:  100 * time.Millisecond,
		Logger:          logger,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = group.Close()
		return 2
	}
	fmt.Printf("ready %s\n", n.Self().Address)
	<-ctx.Done()
	n.Close()
	if err := group.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "closing the devices:", err)
		return 3
	}
	stop()
	if err := goleak.Find(nodeProcessLeaks()...); err != nil {
		fmt.Fprintln(os.Stderr, "goroutines left after Close:", err)
		return 4
	}
	return 0
}

// nodeProcessLeaks are the goroutines protoactor-go leaves in a node's
// process after Node.Close (Cluster.Shutdown(true)); the node process
// checks that nothing else is left.
//   - gRPC client connections of remote's endpoint writers to members that
//     left or were killed, still reconnecting (grpcsync.CallbackSerializer,
//     addrConn.resetTransportAndUnlock): the writer closes its conn only
//     when its actor stops, which Shutdown does not wait for
//     (asynkron/protoactor-go#480, closed upstream, still seen here).
//   - the automanaged provider's HTTP client keeps idle keep-alive
//     connections (net/http persistConn read and write loops) and its
//     monitor sleeps out its refresh period: Shutdown closes neither
//     (cluster/clusterproviders/automanaged/automanaged.go; no upstream
//     issue found).
//   - the throttles of the dead-letter process and the gossip actor each
//     wait out one period after their last event (actor/throttler.go),
//     longer than goleak waits; they end on their own.
func nodeProcessLeaks() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreAnyFunction("google.golang.org/grpc.(*addrConn).resetTransportAndUnlock"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged.(*AutoManagedProvider).monitorStatuses"),
		// The throttles' goroutines, under the names the compiler gives
		// them where NewThrottle is inlined.
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/cluster.(*Gossiper).StartGossiping.NewThrottle.func3.1"),
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/cluster.NewGossipActor.NewThrottleWithLogger.func2.1"),
	}
}
