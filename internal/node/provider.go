package node

import (
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
)

// Provider makes the cluster provider a node joins with: the seam between
// a node and where its membership comes from. Automanaged needs no outside
// service; protoactor-go's etcd, Consul and Kubernetes providers
// (cluster/clusterproviders/{etcd,consul,k8s}) fit the same seam for
// production (docs/design.md, "Across hosts").
type Provider func() (cluster.ClusterProvider, error)

// Automanaged is protoactor-go's automanaged provider: the node serves its
// member description at http://0.0.0.0:port/_health (upstream binds every
// interface, cluster/clusterproviders/automanaged/automanaged.go, UpdateTTL)
// and polls the seeds' ("host:port" of their health endpoints) every
// refresh; a seed that does not answer within the poll leaves the member
// list, and the member list never takes a left member back (a restarted
// node joins under a new member id). The node's own endpoint on listenHost
// is added to seeds when missing.
func Automanaged(listenHost string, port int, refresh time.Duration, seeds ...string) Provider {
	return func() (cluster.ClusterProvider, error) {
		self := net.JoinHostPort(listenHost, strconv.Itoa(port))
		hosts := slices.Clone(seeds)
		if !slices.Contains(hosts, self) {
			hosts = append(hosts, self)
		}
		return automanaged.NewWithConfig(refresh, port, hosts...), nil
	}
}
