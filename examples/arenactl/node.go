package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/node"
)

const nodeLong = `Node runs this host's devices as one member of a gpuarena cluster
(protoactor-go remote and cluster) until Ctrl-C or SIGTERM, then leaves
gracefully and frees everything.

The node serves its gateway (inventory, preflight, reserve, renew,
release, ledger, placement; protobuf messages, internal/nodepb) over gRPC
on --listen, loopback unless told otherwise, and publishes its devices'
inventory through the cluster's gossip on every change and every
--inventory-period. Every node also hosts placement grains (virtual
actors the cluster activates on one node or another): "arenactl place
--cluster" asks any node, and a grain answers from its node's view of the
cluster. Membership comes from --provider:

  automanaged  protoactor-go's: the node answers health checks over plain
               HTTP on --membership-port of the --listen host and polls the
               --seeds, the membership endpoints (host:port) of the other
               nodes; a node that stops answering leaves the others' member
               lists within about 2 × --membership-refresh + 2 s.
  static       a fixed list: the --seeds are the other nodes' --listen
               addresses, probed over gRPC (with TLS when given) every
               --membership-refresh; the node binds nothing but --listen. A
               node that stops answering leaves the others' member lists
               within --membership-refresh + --probe-timeout.

TLS: --tls-cert and --tls-key secure the node's gRPC, its server and its
dials to the other nodes and to clients; with --tls-ca it is mutual TLS:
every peer (node or "arenactl cluster"/"place --cluster" client, which
take the same flags) must present a certificate of that CA, and others
are refused at the handshake. Each certificate must name the host its
process listens on (--listen, or a client's --client-listen) as an IP or
DNS subject alternative name, since the peers dial it there. Without the
flags gRPC is plaintext, and a node listening beyond loopback logs a
warning. The automanaged membership endpoint is plain HTTP either way;
with TLS, --provider static keeps everything on TLS.

A reservation holds bytes on one device under a key for a lease the
holder renews; a repeated reserve with the same key returns the same
reservation, and a lapsed lease's memory is freed by the node.

--devices is a simulated machine on hostsim ("8xh200", "2xh100-80gb"),
a count of devices (ordinals 0 to N-1) on cuda.`

// nodeCmd holds the flags of "arenactl node".
type nodeCmd struct {
	app             *app
	listen          string
	seeds           []string
	membershipPort  int
	refresh         time.Duration
	provider        string
	probeTimeout    time.Duration
	backend         string
	devices         string
	clusterName     string
	inventoryPeriod time.Duration
	tls             tlsFlags
}

// newNodeCmd builds "arenactl node".
func newNodeCmd(a *app) *cobra.Command {
	c := &nodeCmd{app: a}
	cmd := &cobra.Command{
		Use:   "node --listen HOST:PORT --seeds HOST:PORT,... [--provider automanaged|static] [--backend hostsim|cuda] [--devices D] [--tls-cert F --tls-key F [--tls-ca F]]",
		Short: "Run this host's devices as a member of a gpuarena cluster",
		Long:  nodeLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&c.listen, "listen", "127.0.0.1:7700", "gRPC address of the node (host:port); a loopback host keeps it on this host")
	fs.StringSliceVar(&c.seeds, "seeds", nil, "the other nodes (host:port): their membership endpoints (automanaged; the node's own is added) or their --listen addresses (static)")
	fs.StringVar(&c.provider, "provider", providerAutomanaged, "membership provider: automanaged (a plain HTTP health endpoint on --membership-port) or static (a fixed list probed over gRPC; binds only --listen)")
	fs.IntVar(&c.membershipPort, "membership-port", 0, "port of the node's automanaged membership endpoint (default: the --listen port + 1)")
	fs.DurationVar(&c.refresh, "membership-refresh", 2*time.Second, "how often the seeds are polled")
	fs.DurationVar(&c.probeTimeout, "probe-timeout", time.Second, "how long the static provider waits for a seed's answer")
	fs.StringVar(&c.backend, "backend", gpuworker.KindHostSim, "backend, one of those built in: "+strings.Join(gpuworker.Backends(), ", "))
	fs.StringVar(&c.devices, "devices", "1", "the node's devices: a machine on hostsim (\"8xh200\"), a count on cuda")
	fs.StringVar(&c.clusterName, "cluster-name", "gpuarena", "the cluster's name; nodes of other names ignore each other")
	fs.DurationVar(&c.inventoryPeriod, "inventory-period", 2*time.Second, "how often the inventory is published when nothing changes")
	c.tls.register(fs, "the --listen host")
	return cmd
}

// The membership providers of --provider.
const (
	providerAutomanaged = "automanaged"
	providerStatic      = "static"
)

// nodeSetup is what the flags resolve to, before anything starts.
type nodeSetup struct {
	membershipPort int
	provider       node.Provider
	creds          *node.Credentials
	factories      []gpuworker.BackendFactory
}

// setup checks the flags and resolves the membership provider and port,
// the TLS credentials and the devices' backends.
func (c *nodeCmd) setup() (nodeSetup, error) {
	host, p, err := net.SplitHostPort(c.listen)
	port, perr := strconv.Atoi(p)
	if err != nil || perr != nil || host == "" || port < 1 || port > 65535 {
		return nodeSetup{}, fmt.Errorf("--listen %q: want host:port, e.g. 127.0.0.1:7700", c.listen)
	}
	var s nodeSetup
	seeds := "each node's membership endpoint"
	switch c.provider {
	case providerAutomanaged:
		s.membershipPort = c.membershipPort
		if s.membershipPort == 0 {
			s.membershipPort = port + 1
		}
		if s.membershipPort < 1 || s.membershipPort > 65535 || s.membershipPort == port {
			return nodeSetup{}, fmt.Errorf("--membership-port %d: want 1 to 65535, not the --listen port", s.membershipPort)
		}
		s.provider = node.Automanaged(host, s.membershipPort, c.refresh, c.seeds...)
	case providerStatic:
		if c.membershipPort != 0 {
			return nodeSetup{}, errors.New("--membership-port: the static provider serves no membership endpoint; leave it out")
		}
		seeds = "each node's --listen address"
		s.provider = node.Static(c.refresh, c.probeTimeout, c.seeds...)
	default:
		return nodeSetup{}, fmt.Errorf("--provider %q: want %s or %s", c.provider, providerAutomanaged, providerStatic)
	}
	for _, seed := range c.seeds {
		if _, sp, err := net.SplitHostPort(seed); err != nil || sp == "" {
			return nodeSetup{}, fmt.Errorf("--seeds %q: want host:port of %s", seed, seeds)
		}
	}
	if c.refresh <= 0 || c.inventoryPeriod <= 0 || c.probeTimeout <= 0 {
		return nodeSetup{}, errors.New("--membership-refresh, --inventory-period and --probe-timeout must be > 0")
	}
	if s.creds, err = c.tls.credentials(); err != nil {
		return nodeSetup{}, err
	}
	s.factories, err = deviceBackends(c.backend, c.devices)
	return s, err
}

// run opens the devices, joins the cluster, prints the node's address and
// serves until ctx ends; then it leaves and closes the devices.
func (c *nodeCmd) run(ctx context.Context, w io.Writer) error {
	s, err := c.setup()
	if err != nil {
		return err
	}
	group, err := gpuarena.NewGroup(gpuarena.WithDeviceFactories(s.factories...),
		gpuarena.WithRankOptions(gpuarena.WithLogger(c.app.logger)))
	if err != nil {
		return err
	}
	n, err := node.Start(node.Config{
		Listen:          c.listen,
		ClusterName:     c.clusterName,
		Provider:        s.provider,
		Devices:         group,
		InventoryPeriod: c.inventoryPeriod,
		TLS:             s.creds,
		Logger:          c.app.logger,
	})
	if err != nil {
		return errors.Join(err, group.Close())
	}
	membership := fmt.Sprintf("membership on port %d", s.membershipPort)
	if c.provider == providerStatic {
		membership = fmt.Sprintf("static membership of %d seed(s)", len(c.seeds))
	}
	transport := "plaintext gRPC"
	switch {
	case s.creds.Mutual():
		transport = "mutual TLS"
	case s.creds != nil:
		transport = "TLS"
	}
	fmt.Fprintf(w, "node %s (member %s): %d %s device(s), %s, %s\n",
		n.Self().Address, n.Self().ID, group.Ranks(), c.backend, membership, transport)
	<-ctx.Done()
	n.Close()
	return group.Close()
}
