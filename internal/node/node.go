package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"

	"github.com/gpuarena/gpuarena"
)

// ErrConfig is wrapped by every error of a bad Config.
var ErrConfig = errors.New("bad node configuration")

// Config is what one node needs. Zero durations and sizes take the
// defaults named on each field.
type Config struct {
	// Listen is the gRPC address of the node's remote ("host:port"); a
	// node that should be reached from other hosts names that host's
	// address, a loopback address keeps it on this host.
	Listen string
	// ClusterName is the cluster's name; nodes of other names ignore each
	// other. Default "gpuarena".
	ClusterName string
	// Provider is where membership comes from (Automanaged or Static);
	// required.
	Provider Provider
	// Devices are the node's devices, one rank each; required. The node
	// does not close them.
	Devices *gpuarena.Group
	// InventoryPeriod is how often the inventory is published even when
	// nothing changed (it is also published on every change). Default 2 s.
	InventoryPeriod time.Duration
	// LeaseCheck is how often lapsed leases are freed. Default 100 ms.
	LeaseCheck time.Duration
	// GossipInterval is protoactor-go's gossip period. Default 300 ms.
	GossipInterval time.Duration
	// HeartbeatExpiration is how long a member may miss gossip heartbeats
	// before gossip blocks it. Default 20 s (protoactor-go's).
	HeartbeatExpiration time.Duration
	// MaxMessageBytes is the largest gRPC message the node takes; larger
	// ones are refused by gRPC (ResourceExhausted) before they are
	// decoded. Default 1 MiB.
	MaxMessageBytes int
	// CallTimeout bounds each device call the gateway makes. Default 30 s.
	CallTimeout time.Duration
	// PlaceTimeout bounds each placement the gateway asks a placement
	// grain for (cluster.Request). Default 30 s.
	PlaceTimeout time.Duration
	// TLS, when set, secures the node's gRPC (its server and its dials to
	// the other nodes and to clients; LoadCredentials), mutual when they
	// have a CA. Nil is plaintext, and a node listening on an address
	// other than loopback then logs a warning. The automanaged
	// provider's health endpoint is plain HTTP either way.
	TLS *Credentials
	// Logger receives the node's and protoactor-go's logs; protoactor-go's
	// repeated failures are rate-limited (quietHandler). Default: none.
	Logger *slog.Logger
	// Clock is the leases' clock. Default time.Now.
	Clock func() time.Time
}

// withDefaults returns c with its zero fields set to their defaults, or an
// error wrapping ErrConfig naming the bad field.
func (c Config) withDefaults() (Config, string, int, error) {
	if c.ClusterName == "" {
		c.ClusterName = "gpuarena"
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.InventoryPeriod, 2*time.Second)
	def(&c.LeaseCheck, 100*time.Millisecond)
	def(&c.GossipInterval, 300*time.Millisecond)
	def(&c.HeartbeatExpiration, 20*time.Second)
	def(&c.CallTimeout, 30*time.Second)
	def(&c.PlaceTimeout, 30*time.Second)
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = 1 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	host, p, err := net.SplitHostPort(c.Listen)
	port, perr := strconv.Atoi(p)
	switch {
	case err != nil || perr != nil || port < 0 || port > 65535 || host == "":
		return c, "", 0, fmt.Errorf("%w: listen %q: want host:port, e.g. 127.0.0.1:7700", ErrConfig, c.Listen)
	case c.Provider == nil:
		return c, "", 0, fmt.Errorf("%w: no membership provider (node.Automanaged or node.Static)", ErrConfig)
	case c.Devices == nil:
		return c, "", 0, fmt.Errorf("%w: no devices", ErrConfig)
	case c.InventoryPeriod < 0 || c.LeaseCheck < 0 || c.GossipInterval < 0 || c.HeartbeatExpiration < 0 || c.CallTimeout < 0 ||
		c.PlaceTimeout < 0 || c.MaxMessageBytes < 0:
		return c, "", 0, fmt.Errorf("%w: negative period, timeout or size", ErrConfig)
	}
	return c, host, port, nil
}

// Node is one member of a gpuarena cluster: its remote, its cluster
// membership and its gateway actor over the devices of Config.Devices.
type Node struct {
	cluster *cluster.Cluster
	gateway *actor.PID
	self    Member

	stop      chan struct{}
	ticks     sync.WaitGroup
	closeOnce sync.Once
}

// Start joins the cluster as a member: it starts the remote on
// Config.Listen (gRPC, messages up to MaxMessageBytes, Config.TLS), the
// membership provider, the gossip, the placement grain kind
// (PlacementKind), and the gateway actor (GatewayName), which publishes
// the inventory at once, on every change and every InventoryPeriod, frees
// lapsed leases every LeaseCheck, and hands placements to the placement
// grains. protoactor-go sleeps a second inside StartMember. Errors:
// ErrConfig for a bad Config; the provider's; a remote or cluster that
// could not start (a port in use: protoactor-go panics there, and Start
// returns the panic as an error).
func Start(cfg Config) (n *Node, err error) {
	cfg, host, port, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.TLS == nil && !isLoopback(host) {
		cfg.Logger.Warn("gpuarena node: gRPC traffic is plaintext: the node listens beyond loopback without TLS credentials (arenactl node --tls-cert, --tls-key, --tls-ca)",
			"listen", cfg.Listen)
	}
	provider, err := cfg.Provider()
	if err != nil {
		return nil, fmt.Errorf("node %s: membership provider: %w", cfg.Listen, err)
	}
	upstream := slog.New(newQuietHandler(cfg.Logger.Handler(), time.Now))
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return upstream }))
	cc := cluster.Configure(cfg.ClusterName, provider, disthash.New(), RemoteConfig(host, port, cfg.TLS, cfg.MaxMessageBytes),
		cluster.WithHeartbeatExpiration(cfg.HeartbeatExpiration), cluster.WithKinds(placementKind(cfg.Logger)))
	cc.GossipInterval = cfg.GossipInterval
	c := cluster.New(system, cc)
	if err := startMember(c); err != nil {
		system.Shutdown()
		return nil, fmt.Errorf("node %s: %w", cfg.Listen, err)
	}
	n = &Node{cluster: c, self: Member{ID: system.ID, Address: system.Address()}, stop: make(chan struct{})}
	place := (&clusterPlacer{c: c, timeout: cfg.PlaceTimeout}).place
	gw := newGateway(cfg.Devices, gossipMembership{c: c}, place, n.self, cfg.Clock, cfg.CallTimeout, cfg.Logger)
	n.gateway, err = system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return gw }), GatewayName)
	if err != nil {
		c.Shutdown(false)
		return nil, fmt.Errorf("node %s: spawning the gateway: %w", cfg.Listen, err)
	}
	n.tick(cfg.LeaseCheck, leaseTick{})
	n.tick(cfg.InventoryPeriod, publishTick{})
	cfg.Logger.Info("gpuarena node: started", "address", n.self.Address, "member", n.self.ID, "devices", cfg.Devices.Ranks(),
		"tls", cfg.TLS != nil, "mutual_tls", cfg.TLS.Mutual())
	return n, nil
}

// isLoopback reports whether host (an IP or a name) is a loopback
// address: 127.0.0.0/8, ::1 or "localhost".
func isLoopback(host string) bool {
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	return host == "localhost"
}

// startMember runs c.StartMember, returning its panic as an error.
func startMember(c *cluster.Cluster) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("starting the cluster member: %v", p)
		}
	}()
	c.StartMember()
	return nil
}

// tick sends msg to the gateway every period until Close.
func (n *Node) tick(period time.Duration, msg any) {
	n.ticks.Go(func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-n.stop:
				return
			case <-t.C:
				n.cluster.ActorSystem.Root.Send(n.gateway, msg)
			}
		}
	})
}

// Self is the node's member id and address.
func (n *Node) Self() Member { return n.self }

// Close leaves the cluster gracefully (protoactor-go's Cluster.Shutdown,
// which waits about two seconds for ownership to move) after stopping the
// gateway, which waits for its placement calls under way (each at most
// Config.PlaceTimeout). Reservations' memory stays in the devices' ledgers under their
// owners until the caller closes the devices. It is idempotent.
func (n *Node) Close() {
	n.closeOnce.Do(func() {
		close(n.stop)
		n.ticks.Wait()
		_ = n.cluster.ActorSystem.Root.StopFuture(n.gateway).Wait()
		n.cluster.Shutdown(true)
	})
}

// Client returns a client that sends from the node's own actor system,
// waiting at most timeout for each answer; a request to the node's own
// address stays in the process (no gRPC), so it is also the local
// reference for a remote round trip.
func (n *Node) Client(timeout time.Duration) *Client {
	return NewClient(n.cluster.ActorSystem, timeout)
}
