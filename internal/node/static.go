package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
)

// Static is a membership provider over a fixed list of nodes: seeds are
// the nodes' gRPC remote addresses ("host:port", each node's
// Config.Listen). It serves nothing of its own: a node that joins with it
// listens only on Config.Listen (Automanaged also serves an HTTP health
// endpoint on every interface). Every refresh it probes each seed with
// the remote's own handshake (a Remoting.Receive stream carrying a
// ConnectRequest, answered by a ConnectResponse with the seed's member
// id; protoactor-go remote/endpoint_reader.go, onServerConnection) over a
// fresh gRPC connection with the remote's dial options (so TLS
// credentials set there apply), and sets the topology to the node itself
// and the seeds that answered within probeTimeout. A node that stops
// answering leaves the others' member lists within refresh +
// probeTimeout (a refused connection fails at once); the member list never
// takes a left member id back, so a restarted node joins under its new id.
// Every member is given this node's cluster kinds: a static fleet runs one
// binary. The probe does not check the cluster name: the list names one
// cluster's nodes. Errors (when the node starts): ErrConfig for a seed
// that is not host:port or a non-positive refresh or probeTimeout.
func Static(refresh, probeTimeout time.Duration, seeds ...string) Provider {
	return func() (cluster.ClusterProvider, error) {
		if refresh <= 0 || probeTimeout <= 0 {
			return nil, fmt.Errorf("%w: static membership: refresh %v and probe timeout %v must be > 0", ErrConfig, refresh, probeTimeout)
		}
		for _, s := range seeds {
			if _, p, err := net.SplitHostPort(s); err != nil || p == "" {
				return nil, fmt.Errorf("%w: static membership: seed %q: want host:port of a node's --listen", ErrConfig, s)
			}
		}
		return &staticProvider{seeds: slices.Clone(seeds), refresh: refresh, timeout: probeTimeout, stop: make(chan struct{})}, nil
	}
}

// staticProvider is the cluster.ClusterProvider of Static.
type staticProvider struct {
	seeds            []string
	refresh, timeout time.Duration

	cluster *cluster.Cluster
	self    *cluster.Member // nil for a client
	dial    []grpc.DialOption

	stop     chan struct{}
	loop     sync.WaitGroup
	stopOnce sync.Once
}

// StartMember lists this node and the seeds that answer now, then keeps
// the list every refresh until Shutdown.
func (p *staticProvider) StartMember(c *cluster.Cluster) error {
	host, port, err := c.ActorSystem.GetHostPort()
	if err != nil {
		return fmt.Errorf("static membership: the node's address: %w", err)
	}
	p.self = &cluster.Member{Host: host, Port: int32(port), Id: c.ActorSystem.ID, Kinds: c.GetClusterKinds()}
	return p.start(c)
}

// StartClient keeps the list of the seeds that answer, without this
// process in it.
func (p *staticProvider) StartClient(c *cluster.Cluster) error { return p.start(c) }

// start probes once, then every refresh.
func (p *staticProvider) start(c *cluster.Cluster) error {
	p.cluster = c
	p.dial = c.Config.RemoteConfig.DialOptions
	p.update()
	p.loop.Go(func() {
		t := time.NewTicker(p.refresh)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.update()
			}
		}
	})
	return nil
}

// Shutdown stops the probes and waits for the one under way; it is
// idempotent.
func (p *staticProvider) Shutdown(bool) error {
	p.stopOnce.Do(func() { close(p.stop) })
	p.loop.Wait()
	return nil
}

// update probes every seed at once and sets the topology to this node and
// the seeds that answered.
func (p *staticProvider) update() {
	found := make([]*cluster.Member, len(p.seeds))
	var wg sync.WaitGroup
	for i, seed := range p.seeds {
		if p.self != nil && seed == net.JoinHostPort(p.self.Host, strconv.Itoa(int(p.self.Port))) {
			continue
		}
		wg.Go(func() {
			m, err := p.probe(seed)
			if err != nil {
				p.cluster.Logger().Debug("gpuarena static membership: seed not answering", "seed", seed, "err", err)
				return
			}
			found[i] = m
		})
	}
	wg.Wait()
	var members cluster.Members
	if p.self != nil {
		members = append(members, p.self)
	}
	for _, m := range found {
		if m != nil && (p.self == nil || m.Id != p.self.Id) {
			members = append(members, m)
		}
	}
	p.cluster.MemberList.UpdateClusterTopology(members)
}

// errNoConnectResponse: a seed answered the handshake with something else.
var errNoConnectResponse = errors.New("no ConnectResponse to the ConnectRequest")

// probe asks the remote at seed for its member id, within the probe
// timeout, over a connection of its own.
func (p *staticProvider) probe(seed string) (*cluster.Member, error) {
	host, ps, _ := net.SplitHostPort(seed)
	port, err := strconv.Atoi(ps)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	conn, err := grpc.NewClient(seed, p.dial...)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stream, err := remote.NewRemotingClient(conn).Receive(ctx)
	if err != nil {
		return nil, err
	}
	sc := &remote.ServerConnection{MemberId: p.cluster.ActorSystem.ID, Address: p.cluster.ActorSystem.Address()}
	if err := stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{
		ConnectRequest: &remote.ConnectRequest{ConnectionType: &remote.ConnectRequest_ServerConnection{ServerConnection: sc}}}}); err != nil {
		return nil, err
	}
	msg, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	cr := msg.GetConnectResponse()
	if cr == nil || cr.GetMemberId() == "" {
		return nil, errNoConnectResponse
	}
	_ = stream.CloseSend()
	return &cluster.Member{Host: host, Port: int32(port), Id: cr.GetMemberId(), Kinds: p.cluster.GetClusterKinds()}, nil
}
