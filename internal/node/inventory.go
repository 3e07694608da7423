package node

import (
	"context"
	"fmt"
	"sort"

	"github.com/gpuarena/gpuarena/internal/nodepb"
)

// inventory takes the node's inventory now: per device its name, the
// driver's total and free memory, the budget, the ledger's bytes in use and
// by owner (owners holding nothing left out, sorted by owner), and the
// deployment on it, if any.
func (g *gateway) inventory(ctx context.Context) (*nodepb.Inventory, error) {
	inv := &nodepb.Inventory{MemberId: g.self.ID, Address: g.self.Address, Version: g.version,
		TakenUnixMs: g.now().UnixMilli()}
	for r := range g.group.Ranks() {
		mgr := g.group.Rank(r)
		free, total, err := mgr.MemInfo(ctx)
		if err != nil {
			return nil, fmt.Errorf("inventory of device %d: %w", r, err)
		}
		led, err := mgr.Ledger(ctx)
		if err != nil {
			return nil, fmt.Errorf("inventory of device %d: %w", r, err)
		}
		d := &nodepb.DeviceInventory{Index: int32(r), Name: mgr.Device().Name, TotalBytes: total, FreeBytes: free,
			BudgetBytes: mgr.Budget(), UsedBytes: led.Counters.CurrentBytes}
		for owner, u := range led.Owners {
			if u.CurrentBytes > 0 {
				d.Owners = append(d.Owners, &nodepb.OwnerBytes{Owner: owner, Bytes: u.CurrentBytes})
			}
		}
		sort.Slice(d.Owners, func(i, j int) bool { return d.Owners[i].Owner < d.Owners[j].Owner })
		g.describeDeployment(d)
		inv.Devices = append(inv.Devices, d)
	}
	return inv, nil
}

// publish takes the inventory and hands it to the membership; a failure is
// logged, and the next change or period publishes again.
func (g *gateway) publish(ctx context.Context) {
	inv, err := g.inventory(ctx)
	if err != nil {
		g.logger.Error("gpuarena node: taking the inventory", "err", err)
		return
	}
	g.members.Publish(inv)
}
