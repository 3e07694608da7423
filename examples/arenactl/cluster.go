package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuarena/gpuarena/internal/node"
	"github.com/gpuarena/gpuarena/internal/nodepb"
)

const clusterLong = `Cluster asks a running gpuarena cluster (nodes started with "arenactl
node") through one of its nodes, --cluster HOST:PORT (a node's --listen
address), over protoactor-go's remote (gRPC).

  inventory  every live node's devices as the asked node's gossip has them
  meminfo    one node's devices: free, total, budget, ledger bytes
  reserve    hold bytes on one device of a node under a key, for a lease
  build      deploy a model's pipeline stage on a node's devices (its
             arenas) under a key, for a lease
  load       load a deployment's weights from a model folder on its node
  renew      extend a reservation's or a deployment's lease
  release    free a reservation or a deployment

A reservation is made on the node that holds the device (--node, default
--cluster): the node's ledger decides, and a reserve that no longer fits is
refused with the out-of-memory error and the bytes it had left. Reserving
again with the same key and arguments returns the same reservation and
renews it, so a reserve that timed out is retried with its key. A lease not
renewed within its --ttl is freed by the node. A deployment is keyed and
leased the same way, and takes devices that hold nothing else.

The nodes answer on --client-listen: loopback by default, so across hosts
name this host's address there. With nodes on TLS ("arenactl node
--tls-cert"), give --tls-cert and --tls-key (a certificate naming the
--client-listen host, which the nodes dial to answer) and, for mutual TLS,
--tls-ca. "arenactl place --cluster" asks where a model fits.

Exit status: 0 on success, 1 when release finds nothing of the key,
2 on an error (a refusal, a node not answering).`

// clusterCmd holds the flags of "arenactl cluster" and its subcommands.
type clusterCmd struct {
	app     *app
	conn    clusterFlags
	jsonOut bool

	node   string
	device int32
	bytes  byteSize
	key    string
	ttl    time.Duration
	label  string
	deploy deployFlags
}

// newClusterCmd builds "arenactl cluster" and its subcommands.
func newClusterCmd(a *app) *cobra.Command {
	c := &clusterCmd{app: a}
	cmd := &cobra.Command{
		Use:   "cluster (inventory | meminfo | reserve | build | load | renew | release) --cluster HOST:PORT [flags]",
		Short: "Ask a running cluster: inventory, memory, reserve, deploy, renew and release on its nodes",
		Long:  clusterLong,
		Args:  cobra.NoArgs,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&c.conn.cluster, "cluster", "", "a node of the cluster to ask: its --listen address (host:port; required)")
	c.conn.register(pf)
	pf.BoolVar(&c.jsonOut, "json", false, "print the answer as JSON")

	sub := func(use, short string, needs string, run func(context.Context, *node.Client, io.Writer) error) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error { return c.run(cmd.Context(), cmd.OutOrStdout(), needs, run) }}
	}
	inv := sub("inventory --cluster HOST:PORT", "Every live node's devices: total, free, budget, used, bytes by owner", "", c.inventory)
	reserve := sub("reserve --cluster HOST:PORT [--node HOST:PORT] --device D --bytes SIZE --key K [--ttl 30s]",
		"Reserve bytes on a node's device under a key, for a lease (idempotent by key)", "key,bytes", c.reserve)
	renew := sub("renew --cluster HOST:PORT [--node HOST:PORT] --key K [--ttl 30s]", "Extend a reservation's or a deployment's lease by --ttl from now", "key", c.renew)
	release := sub("release --cluster HOST:PORT [--node HOST:PORT] --key K",
		"Free a reservation or a deployment (exit 1 when the node holds none of the key)", "key", c.release)
	meminfo := sub("meminfo --cluster HOST:PORT [--node HOST:PORT] [--device D]", "A node's devices now: free, total, budget, ledger bytes", "", c.meminfo)
	build := newClusterBuildCmd(c)
	load := sub("load --cluster HOST:PORT [--node HOST:PORT] --key K --model-dir DIR",
		"Load a deployment's weights, each device its rank's shard, from a model folder on the node (idempotent)", "key", c.load)
	for _, s := range []*cobra.Command{reserve, renew, release, build, load, meminfo} {
		s.Flags().StringVar(&c.node, "node", "", "the node to ask: its --listen address (default: --cluster)")
	}
	for _, s := range []*cobra.Command{reserve, renew, release, build, load} {
		s.Flags().StringVar(&c.key, "key", "", "the reservation's or deployment's key, 1 to 256 bytes (required)")
	}
	for _, s := range []*cobra.Command{reserve, renew, build} {
		s.Flags().DurationVar(&c.ttl, "ttl", 30*time.Second, "the lease: the node frees the reservation (or deployment) when it is not renewed within this (100ms to 24h)")
	}
	reserve.Flags().Int32Var(&c.device, "device", 0, "the device index on the node")
	reserve.Flags().Var(&c.bytes, "bytes", "bytes to reserve: a count or a size (1GiB, 512MiB; required)")
	reserve.Flags().StringVar(&c.label, "label", "", "the ledger label of the allocation (default: reservation)")
	meminfo.Flags().Int32Var(&c.deploy.memDev, "device", -1, "the device index on the node (< 0: every device)")
	load.Flags().StringVar(&c.deploy.modelDir, "model-dir", "", "the model folder (config.json and safetensors) on the node's filesystem (required)")
	cmd.AddCommand(inv, meminfo, reserve, build, load, renew, release)
	return cmd
}

// run checks the flags (needs: "key", "bytes", comma-separated, those the
// subcommand requires), connects and runs op against the cluster.
func (c *clusterCmd) run(ctx context.Context, w io.Writer, needs string, op func(context.Context, *node.Client, io.Writer) error) error {
	if err := c.conn.check(); err != nil {
		return err
	}
	if strings.Contains(needs, "key") && c.key == "" {
		return errors.New("--key: the reservation's or deployment's key is required")
	}
	if strings.Contains(needs, "bytes") && c.bytes <= 0 {
		return errors.New("--bytes: the bytes to reserve are required (> 0)")
	}
	if c.node == "" {
		c.node = c.conn.cluster
	} else if err := checkHostPort("node", c.node, 1); err != nil {
		return err
	} else if err := reachable("node", c.node, c.conn.timeout); err != nil {
		return err
	}
	client, closeClient, err := c.conn.connect(c.app)
	if err != nil {
		return err
	}
	defer closeClient()
	return c.conn.explain(op(ctx, client, w))
}

// inventory writes every live node's inventory as the node at --cluster
// has it.
func (c *clusterCmd) inventory(ctx context.Context, client *node.Client, w io.Writer) error {
	invs, err := client.ClusterInventory(ctx, c.conn.cluster)
	if err != nil {
		return err
	}
	if c.jsonOut {
		return writeJSON(w, nonNil(invs))
	}
	fmt.Fprintf(w, "%d node(s), as %s sees them\n\n", len(invs), c.conn.cluster)
	tw := newTable(w)
	row(tw, "node", "member", "device", "name", "total", "free", "budget", "used", "deployment", "owners")
	for _, inv := range invs {
		for _, d := range inv.GetDevices() {
			var owners []string
			for _, o := range d.GetOwners() {
				owners = append(owners, fmt.Sprintf("%s=%s", o.GetOwner(), human(o.GetBytes())))
			}
			dep := "-"
			if k := d.GetDeploymentKey(); k != "" {
				dep = fmt.Sprintf("%s (%s, %s)", k, d.GetModelType(), yesNo(d.GetWeightsLoaded(), "weights from "+d.GetModelDir(), "no weights"))
			}
			row(tw, inv.GetAddress(), inv.GetMemberId(), d.GetIndex(), d.GetName(), human(d.GetTotalBytes()), human(d.GetFreeBytes()),
				human(d.GetBudgetBytes()), human(d.GetUsedBytes()), dep, strings.Join(owners, " "))
		}
	}
	return tw.Flush()
}

// reserve reserves --bytes on --device of --node under --key.
func (c *clusterCmd) reserve(ctx context.Context, client *node.Client, w io.Writer) error {
	r, err := client.Reserve(ctx, c.node, &nodepb.ReserveRequest{Key: c.key, Device: c.device, Bytes: int64(c.bytes),
		TtlMs: c.ttl.Milliseconds(), Label: c.label})
	if err != nil {
		return err
	}
	return c.writeReservation(w, "reserved", r)
}

// renew extends --key's lease on --node by --ttl: a reservation's or a
// deployment's.
func (c *clusterCmd) renew(ctx context.Context, client *node.Client, w io.Writer) error {
	r, dep, err := client.RenewLease(ctx, c.node, c.key, c.ttl)
	if err != nil {
		return err
	}
	if dep != nil {
		return c.writeDeployment(w, "renewed", dep)
	}
	return c.writeReservation(w, "renewed", r)
}

// release frees --key's reservation on --node; a negative answer (exit
// status 1) when the node holds none.
func (c *clusterCmd) release(ctx context.Context, client *node.Client, w io.Writer) error {
	released, err := client.Release(ctx, c.node, c.key)
	if err != nil {
		return err
	}
	if c.jsonOut {
		err = writeJSON(w, map[string]any{"node": c.node, "key": c.key, "released": released})
	} else if released {
		fmt.Fprintf(w, "released %q on %s\n", c.key, c.node)
	}
	if err == nil && !released {
		err = negative(fmt.Errorf("%s holds no reservation or deployment %q (released, lapsed or never made)", c.node, c.key))
	}
	return err
}

// writeReservation writes r as text or JSON.
func (c *clusterCmd) writeReservation(w io.Writer, verb string, r *nodepb.Reservation) error {
	if c.jsonOut {
		return writeJSON(w, r)
	}
	fmt.Fprintf(w, "%s %q on %s device %d: %s, owner %s, label %s, lease until %s (ttl %v)\n", verb, r.GetKey(), c.node,
		r.GetDevice(), bytesAndHuman(r.GetBytes()), r.GetOwner(), r.GetLabel(),
		time.UnixMilli(r.GetExpiresUnixMs()).UTC().Format(time.RFC3339Nano), time.Duration(r.GetTtlMs())*time.Millisecond)
	return nil
}
