package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
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
release, ledger; protobuf messages, internal/nodepb) over gRPC on --listen,
loopback unless told otherwise, and publishes its devices' inventory
through the cluster's gossip on every change and every
--inventory-period. Membership is protoactor-go's automanaged provider: the
node answers health checks on --membership-port (upstream binds it on every
interface) and polls the --seeds, the membership endpoints (host:port) of
the other nodes; a node that stops answering leaves the others' member
lists within about 2 × --membership-refresh + 2 s.

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
	backend         string
	devices         string
	clusterName     string
	inventoryPeriod time.Duration
}

// newNodeCmd builds "arenactl node".
func newNodeCmd(a *app) *cobra.Command {
	c := &nodeCmd{app: a}
	cmd := &cobra.Command{
		Use:   "node --listen HOST:PORT --seeds HOST:PORT,... [--backend hostsim|cuda] [--devices D]",
		Short: "Run this host's devices as a member of a gpuarena cluster",
		Long:  nodeLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&c.listen, "listen", "127.0.0.1:7700", "gRPC address of the node (host:port); a loopback host keeps it on this host")
	fs.StringSliceVar(&c.seeds, "seeds", nil, "membership endpoints (host:port) of the other nodes; the node's own is added")
	fs.IntVar(&c.membershipPort, "membership-port", 0, "port of the node's membership endpoint (default: the --listen port + 1)")
	fs.DurationVar(&c.refresh, "membership-refresh", 2*time.Second, "how often the seeds are polled")
	fs.StringVar(&c.backend, "backend", gpuworker.KindHostSim, "backend, one of those built in: "+strings.Join(gpuworker.Backends(), ", "))
	fs.StringVar(&c.devices, "devices", "1", "the node's devices: a machine on hostsim (\"8xh200\"), a count on cuda")
	fs.StringVar(&c.clusterName, "cluster-name", "gpuarena", "the cluster's name; nodes of other names ignore each other")
	fs.DurationVar(&c.inventoryPeriod, "inventory-period", 2*time.Second, "how often the inventory is published when nothing changes")
	return cmd
}

// nodeSetup is what the flags resolve to, before anything starts.
type nodeSetup struct {
	host           string
	membershipPort int
	factories      []gpuworker.BackendFactory
}

// setup checks the flags and resolves the listen host, the membership port
// and the devices' backends.
func (c *nodeCmd) setup() (nodeSetup, error) {
	host, p, err := net.SplitHostPort(c.listen)
	port, perr := strconv.Atoi(p)
	if err != nil || perr != nil || host == "" || port < 1 || port > 65535 {
		return nodeSetup{}, fmt.Errorf("--listen %q: want host:port, e.g. 127.0.0.1:7700", c.listen)
	}
	s := nodeSetup{host: host, membershipPort: c.membershipPort}
	if s.membershipPort == 0 {
		s.membershipPort = port + 1
	}
	if s.membershipPort < 1 || s.membershipPort > 65535 || s.membershipPort == port {
		return nodeSetup{}, fmt.Errorf("--membership-port %d: want 1 to 65535, not the --listen port", s.membershipPort)
	}
	for _, seed := range c.seeds {
		if _, sp, err := net.SplitHostPort(seed); err != nil || sp == "" {
			return nodeSetup{}, fmt.Errorf("--seeds %q: want host:port of each node's membership endpoint", seed)
		}
	}
	if c.refresh <= 0 || c.inventoryPeriod <= 0 {
		return nodeSetup{}, errors.New("--membership-refresh and --inventory-period must be > 0")
	}
	s.factories, err = c.backends()
	return s, err
}

// backends are the devices' backends: a hostsim machine
// (gpuworker.ParseMachine), or ordinals 0 to N-1 of another backend.
func (c *nodeCmd) backends() ([]gpuworker.BackendFactory, error) {
	if c.backend == gpuworker.KindHostSim {
		mc, err := gpuworker.ParseMachine(c.devices)
		if err != nil {
			return nil, fmt.Errorf("--devices: %w", err)
		}
		m, err := gpuworker.NewHostSimMachine(mc)
		if err != nil {
			return nil, fmt.Errorf("--devices: %w", err)
		}
		return m.Factories(), nil
	}
	if !slices.Contains(gpuworker.Backends(), c.backend) {
		return nil, fmt.Errorf("--backend %q: %w", c.backend, &gpuworker.BackendNotBuiltInError{Name: c.backend, Available: gpuworker.Backends()})
	}
	n, err := strconv.Atoi(c.devices)
	if err != nil || n < 1 || n > gpuworker.MaxMachineDevices {
		return nil, fmt.Errorf("--devices %q: the %s backend takes a count of devices, 1 to %d", c.devices, c.backend, gpuworker.MaxMachineDevices)
	}
	fs := make([]gpuworker.BackendFactory, n)
	for i := range fs {
		fs[i] = gpuworker.BackendConfig{Kind: c.backend, Ordinal: i}.Factory()
	}
	return fs, nil
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
		Provider:        node.Automanaged(s.host, s.membershipPort, c.refresh, c.seeds...),
		Devices:         group,
		InventoryPeriod: c.inventoryPeriod,
		Logger:          c.app.logger,
	})
	if err != nil {
		return errors.Join(err, group.Close())
	}
	fmt.Fprintf(w, "node %s (member %s): %d %s device(s), membership on port %d\n",
		n.Self().Address, n.Self().ID, group.Ranks(), c.backend, s.membershipPort)
	<-ctx.Done()
	n.Close()
	return group.Close()
}
