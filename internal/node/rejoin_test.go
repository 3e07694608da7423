package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena/internal/nodepb"
	"github.com/gpuarena/gpuarena/internal/testkit"
)

// staticProbeTimeout is the Static provider's probe timeout in the test's
// node processes.
const staticProbeTimeout = 500 * time.Millisecond

// staticRemovalBound is how long a killed node may stay in the others'
// member lists with the Static provider: a probe every testRefresh, failing
// at once on loopback (connection refused) and at the latest after
// staticProbeTimeout, plus a second of slack for a loaded test machine.
const staticRemovalBound = testRefresh + staticProbeTimeout + time.Second

// rejoinBound is how long a restarted node may take, from its "ready" line,
// to be in the others' views with its inventory: the others' next probe
// (testRefresh + staticProbeTimeout), then the gossip that carries its
// inventory (a few of the child's 100 ms gossip intervals), plus a second
// of slack.
const rejoinBound = testRefresh + staticProbeTimeout + 500*time.Millisecond + time.Second

// memberOf is the member id of the inventory of address among invs; "" when
// that node is absent.
func memberOf(invs []*nodepb.Inventory, address string) string {
	for _, inv := range invs {
		if inv.GetAddress() == address {
			return inv.GetMemberId()
		}
	}
	return ""
}

func TestStaticClusterRejoinsARestartedNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three node processes, kills one and starts it again")
	}
	ports := freePorts(t, 3)
	var seeds []string
	for _, p := range ports {
		seeds = append(seeds, fmt.Sprintf("127.0.0.1:%d", p))
	}
	spec := func(i int) childSpec {
		return childSpec{GRPCPort: ports[i], Seeds: seeds, Machine: "1xh100-80gb", Refresh: testRefresh, Static: true}
	}
	nodes := make([]*child, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() { nodes[i], errs[i] = startChild(t, spec(i)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	client, shutdownClient := startTestClient(t)
	ctx := context.Background()
	killedAddr := nodes[2].address
	var firstID string
	testkit.Eventually(t, 20*time.Second, "the static cluster formed", func() error {
		for _, n := range nodes {
			invs, err := client.ClusterInventory(ctx, n.address)
			if err != nil {
				return err
			}
			if len(invs) != 3 {
				return fmt.Errorf("%s sees %v", n.address, addresses(invs))
			}
			firstID = memberOf(invs, killedAddr)
		}
		return nil
	})
	// The Static provider serves nothing besides the remote: the node
	// listens on its --listen address alone (127.0.0.1 is 0100007F in
	// /proc/net/tcp).
	if socks, ok := listeningSockets(nodes[0].cmd.Process.Pid); ok {
		want := fmt.Sprintf("0100007F:%04X", ports[0])
		if len(socks) != 1 || socks[0] != want {
			t.Fatalf("node %s listens on %v, want only %s", nodes[0].address, socks, want)
		}
	}

	if err := nodes[2].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	took := testkit.Eventually(t, staticRemovalBound, "the killed node removed", func() error {
		for _, n := range nodes[:2] {
			invs, err := client.ClusterInventory(ctx, n.address)
			if err != nil {
				return err
			}
			if memberOf(invs, killedAddr) != "" {
				return fmt.Errorf("%s still sees %s", n.address, killedAddr)
			}
		}
		return nil
	})
	t.Logf("killed node removed after %v (bound %v)", took, staticRemovalBound)

	restarted, err := startChild(t, spec(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(shutdownClient) // before the restarted node stops
	took = testkit.Eventually(t, rejoinBound, "the restarted node back in both views", func() error {
		for _, n := range nodes[:2] {
			invs, err := client.ClusterInventory(ctx, n.address)
			if err != nil {
				return err
			}
			id := memberOf(invs, restarted.address)
			switch {
			case id == "":
				return fmt.Errorf("%s does not see %s", n.address, restarted.address)
			case id == firstID:
				return fmt.Errorf("%s sees %s under its old member id %s", n.address, restarted.address, id)
			}
			if got := heldBy(invs, restarted.address, 0, ""); got != 0 {
				return fmt.Errorf("%s sees %d B held on the restarted node", n.address, got)
			}
		}
		return nil
	})
	t.Logf("restarted node rejoined with its inventory after %v (bound %v; old member %s)", took, rejoinBound, firstID)
	// The restarted node sees the others too.
	invs, err := client.ClusterInventory(ctx, restarted.address)
	if err != nil || len(invs) != 3 {
		t.Fatalf("the restarted node sees %v (%v), want all three", addresses(invs), err)
	}
}
