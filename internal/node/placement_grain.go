package node

import (
	"fmt"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/internal/nodepb"
)

// PlacementKind is the cluster kind of the placement grain: a stateless
// virtual actor that answers nodepb.PlaceRequest from the inventories as
// its own node's gossip holds them (Place). Every node registers the kind,
// so any node can host an activation; protoactor-go's identity lookup
// (disthash: rendezvous hashing of the identity over the members) decides
// which one does.
const PlacementKind = "gpuarena-placement"

// PlacementGrains is how many placement grain identities a node's gateway
// spreads its placement requests over ("placement-0" …), round robin, so
// that placements run on several nodes at once and none waits behind
// another's in one grain's mailbox.
const PlacementGrains = 8

// placementIdentity is the identity of the placement grain n (mod
// PlacementGrains).
func placementIdentity(n uint64) string {
	return fmt.Sprintf("placement-%d", n%PlacementGrains)
}

// placementKind is the kind every node registers: each activation reads
// its node's cluster (gossip state, member list) when the cluster
// middleware hands it over (cluster.ClusterInit, right after Started).
func placementKind(logger *slog.Logger) *cluster.Kind {
	return cluster.NewKind(PlacementKind, actor.PropsFromProducer(func() actor.Actor {
		return &placementGrain{logger: logger}
	}))
}

// placementGrain answers PlaceRequests. It holds no state of its own
// (members and self come from its node), so an activation can be dropped,
// moved or asked the same request twice — cluster.Request retries a
// request that timed out — and answer the same.
type placementGrain struct {
	members Membership
	self    Member
	logger  *slog.Logger
}

// Receive answers a PlaceRequest with Place over members' inventories; a
// request before the grain knows its cluster, or of another type, is
// refused.
func (g *placementGrain) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *cluster.ClusterInit:
		g.members = gossipMembership{c: m.Cluster}
		g.self = Member{ID: m.Cluster.ActorSystem.ID, Address: m.Cluster.ActorSystem.Address()}
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
	case *nodepb.PlaceRequest:
		respond(c, answerPlace(g.members, g.self, m))
	default:
		g.logger.Warn("gpuarena placement grain: message refused", "type", fmt.Sprintf("%T", m), "sender", c.Sender())
		respond(c, &nodepb.Error{Code: nodepb.ErrorCode_ERROR_CODE_UNKNOWN_MESSAGE,
			Message: fmt.Sprintf("message %T is not one the placement grain takes (gpuarena.node.v1.PlaceRequest only)", m)})
	}
}

// answerPlace answers m from members' inventories (Place), as self. A
// config or option arena refuses is ERROR_CODE_INVALID_ARGUMENT.
func answerPlace(members Membership, self Member, m *nodepb.PlaceRequest) *nodepb.PlaceResponse {
	out := &nodepb.PlaceResponse{AnsweredBy: &nodepb.NodeRef{MemberId: self.ID, Address: self.Address}}
	if members == nil {
		out.Error = wireError(fmt.Errorf("place: the placement grain on %s has no cluster yet: %w", self.Address, ErrInternal))
		return out
	}
	cfg, opts, fo, po, err := placeArgs(m)
	if err != nil {
		out.Error = wireError(err)
		return out
	}
	invs, err := members.Inventories()
	if err != nil {
		out.Error = wireError(err)
		return out
	}
	ps, err := Place(cfg, opts, fo, po, invs)
	if err != nil {
		out.Error = wireError(fmt.Errorf("place: %w: %w", gpuarena.ErrInvalidValue, err))
		return out
	}
	for _, p := range ps {
		w := &nodepb.Placement{TensorParallelSize: p.Layout.TensorParallelSize, PipelineParallelSize: p.Layout.PipelineParallelSize,
			Gpus: p.Fit.GPUs, KvBlocks: p.Fit.KVBlocks, KvTokens: p.Fit.KVTokens, MaxConcurrentSeqs: p.Fit.MaxConcurrentSeqs}
		for _, s := range p.Stages {
			w.Stages = append(w.Stages, &nodepb.Stage{Address: s.Address, MemberId: s.MemberID, Devices: s.Devices})
		}
		out.Placements = append(out.Placements, w)
	}
	return out
}
