package node

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/gpuarena/gpuarena/internal/nodepb"
)

// MaxPlacementCalls is how many placement requests a node's gateway has
// under way at once; one more is refused with ERROR_CODE_BUSY (ErrBusy).
const MaxPlacementCalls = 32

// placer asks a placement grain for the answer to m and waits for it; it
// runs outside the gateway's mailbox, in a placement call of its own.
type placer func(m *nodepb.PlaceRequest) *nodepb.PlaceResponse

// clusterPlacer is the placer of a cluster member: cluster.Request to the
// placement grains' identities in turn (placementIdentity), each call
// bounded by timeout. cluster.Request resends a request whose answer is
// lost (a dead letter, a moved activation), so a grain may answer one
// request twice: its answer is pure (placementGrain).
type clusterPlacer struct {
	c       *cluster.Cluster
	timeout time.Duration
	next    atomic.Uint64
}

// place asks the next placement grain.
func (p *clusterPlacer) place(m *nodepb.PlaceRequest) *nodepb.PlaceResponse {
	id := placementIdentity(p.next.Add(1) - 1)
	res, err := p.c.Request(id, PlacementKind, m, cluster.WithTimeout(p.timeout))
	if err != nil {
		return &nodepb.PlaceResponse{Error: wireError(fmt.Errorf("place: asking the placement grain %s (within %v): %w", id, p.timeout, err))}
	}
	switch r := res.(type) {
	case *nodepb.PlaceResponse:
		return r
	case *nodepb.Error:
		return &nodepb.PlaceResponse{Error: r}
	}
	return &nodepb.PlaceResponse{Error: wireError(fmt.Errorf("place: the placement grain %s answered %T: %w", id, res, ErrUnknownMessage))}
}

// startPlace hands m to a placement call, a child actor that asks the
// placer and answers the sender itself, so the gateway's mailbox goes on
// with reserves and releases meanwhile. A request nobody waits for is
// dropped; one past MaxPlacementCalls under way is refused with ErrBusy.
func (g *gateway) startPlace(c actor.Context, m *nodepb.PlaceRequest) {
	replyTo := c.Sender()
	if replyTo == nil {
		return
	}
	if len(g.placing) >= MaxPlacementCalls {
		respond(c, &nodepb.PlaceResponse{Error: wireError(fmt.Errorf("place: %w: node %s has %d placements under way; ask again later",
			ErrBusy, g.self.Address, len(g.placing)))})
		return
	}
	place := g.place
	pid := c.Spawn(actor.PropsFromFunc(func(pc actor.Context) {
		if _, ok := pc.Message().(*actor.Started); !ok {
			return
		}
		pc.Send(replyTo, place(m))
		pc.Stop(pc.Self())
	}))
	g.placing[pid.GetId()] = true
}
