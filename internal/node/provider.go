package node

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
	"github.com/labstack/echo/v4"
)

// Provider makes the cluster provider a node joins with: the seam between
// a node and where its membership comes from. Automanaged needs no outside
// service; protoactor-go's etcd, Consul and Kubernetes providers
// (cluster/clusterproviders/{etcd,consul,k8s}) fit the same seam for
// production (docs/design.md, "Across hosts").
type Provider func() (cluster.ClusterProvider, error)

// Automanaged is protoactor-go's automanaged provider: the node serves its
// member description over plain HTTP at http://listenHost:port/_health
// and polls the seeds' ("host:port" of their health endpoints) every
// refresh; a seed that does not answer within the poll leaves the member
// list, and the member list never takes a left member back (a restarted
// node joins under a new member id). The node's own endpoint on listenHost
// is added to seeds when missing. The endpoint is this package's echo
// server handed to the provider (automanaged.NewWithTesting, the one way
// upstream takes a server of the caller's): it listens on listenHost only
// (upstream's own binds 0.0.0.0, automanaged.go UpdateTTL), prints no
// banner or address on stdout, and logs through the cluster's logger.
// Errors (when the node starts): the endpoint's address cannot be listened
// on.
func Automanaged(listenHost string, port int, refresh time.Duration, seeds ...string) Provider {
	return func() (cluster.ClusterProvider, error) {
		self := net.JoinHostPort(listenHost, strconv.Itoa(port))
		hosts := slices.Clone(seeds)
		if !slices.Contains(hosts, self) {
			hosts = append(hosts, self)
		}
		e := echo.New()
		e.HideBanner, e.HidePort = true, true
		e.Logger.SetOutput(io.Discard)
		return &automanagedProvider{AutoManagedProvider: automanaged.NewWithTesting(refresh, port, e, hosts...),
			endpoint: self, port: port, health: e}, nil
	}
}

// automanagedProvider is protoactor-go's automanaged provider over the
// health endpoint of Automanaged.
type automanagedProvider struct {
	*automanaged.AutoManagedProvider
	endpoint string
	port     int
	health   *echo.Echo
}

// StartMember listens on the health endpoint, serves the member
// description there (automanaged.NodeModel, as upstream's getCurrentNode
// fills it) and starts upstream's provider, which serves it and polls the
// seeds.
func (p *automanagedProvider) StartMember(c *cluster.Cluster) error {
	host, port, err := c.ActorSystem.GetHostPort()
	if err != nil {
		return fmt.Errorf("automanaged membership: the node's address: %w", err)
	}
	l, err := net.Listen("tcp", p.endpoint)
	if err != nil {
		return fmt.Errorf("automanaged membership endpoint %s (the gRPC port + 1 unless the membership port is set; another node's --listen there?): %w", p.endpoint, err)
	}
	p.health.Listener = l
	p.health.StdLogger = slog.NewLogLogger(c.Logger().Handler(), slog.LevelWarn)
	node := automanaged.NewNode(c.Config.Name, c.ActorSystem.ID, host, port, p.port, c.GetClusterKinds())
	p.health.GET("/_health", func(ec echo.Context) error { return ec.JSON(http.StatusOK, node) })
	if err := p.AutoManagedProvider.StartMember(c); err != nil {
		_ = l.Close()
		return err
	}
	return nil
}
