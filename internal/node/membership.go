package node

import (
	"fmt"
	"sort"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/gpuarena/gpuarena/internal/nodepb"
)

// InventoryKey is the cluster gossip key under which every node publishes
// its *nodepb.Inventory.
const InventoryKey = "gpuarena.inventory"

// Member names one node of the cluster: its member id (the actor system's
// id, new at every start) and its remote address ("host:port").
type Member struct {
	ID, Address string
}

// Membership is how the gateway shares inventories: Publish hands the
// node's own to the others, Inventories returns every live member's as it
// has reached this node. The cluster's gossip (gossipMembership) is one;
// tests of the gateway alone use their own.
type Membership interface {
	Publish(inv *nodepb.Inventory)
	Inventories() ([]*nodepb.Inventory, error)
}

// gossipMembership shares inventories through protoactor-go's cluster
// gossip state (Gossiper.SetState under InventoryKey), which every member
// merges from the others every GossipInterval.
type gossipMembership struct {
	c *cluster.Cluster
}

// Publish sets the node's gossip state under InventoryKey.
func (m gossipMembership) Publish(inv *nodepb.Inventory) { m.c.Gossip.SetState(InventoryKey, inv) }

// Inventories reads the gossip state under InventoryKey and keeps the
// members the member list holds now (a dead member's last state stays in
// the gossip state; the member list drops it), sorted by address.
func (m gossipMembership) Inventories() ([]*nodepb.Inventory, error) {
	state, err := m.c.Gossip.GetState(InventoryKey)
	if err != nil {
		return nil, fmt.Errorf("cluster inventory: reading the gossip state: %w", err)
	}
	var out []*nodepb.Inventory
	for id, kv := range state {
		if id != m.c.ActorSystem.ID && !m.c.MemberList.ContainsMemberID(id) {
			continue
		}
		inv := &nodepb.Inventory{}
		if err := kv.GetValue().UnmarshalTo(inv); err != nil {
			return nil, fmt.Errorf("cluster inventory of member %s: %w", id, err)
		}
		out = append(out, inv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetAddress() < out[j].GetAddress() })
	return out, nil
}
