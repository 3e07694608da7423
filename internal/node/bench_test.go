package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/internal/nodepb"
	"github.com/gpuarena/gpuarena/internal/testkit"
	"github.com/gpuarena/gpuarena/internal/testkit/simgroup"
)

// latencies records one duration per operation and reports their p50 and
// p99 as the benchmark's metrics "p50-ns" and "p99-ns" (nearest rank).
type latencies []time.Duration

func (l *latencies) add(d time.Duration) { *l = append(*l, d) }

func (l latencies) report(b *testing.B, prefix string) {
	if len(l) == 0 {
		return
	}
	s := slices.Clone(l)
	slices.Sort(s)
	at := func(q float64) float64 { return float64(s[min(len(s)-1, int(q*float64(len(s))))].Nanoseconds()) }
	b.ReportMetric(at(0.50), prefix+"p50-ns")
	b.ReportMetric(at(0.99), prefix+"p99-ns")
}

// fixedMembership is a membership of given inventories (the simulated
// members of the placement benchmarks); Publish is ignored.
type fixedMembership []*nodepb.Inventory

func (fixedMembership) Publish(*nodepb.Inventory)                   {}
func (f fixedMembership) Inventories() ([]*nodepb.Inventory, error) { return f, nil }

// simulatedInventory is the inventory of a node at address with machine's
// devices (arena.ParseMachine: "8xh200"), each empty.
func simulatedInventory(tb testing.TB, address, machine string) *nodepb.Inventory {
	tb.Helper()
	m, err := arena.ParseMachine(machine)
	if err != nil {
		tb.Fatal(err)
	}
	inv := &nodepb.Inventory{MemberId: "member-" + address, Address: address}
	for i := range m.Count {
		inv.Devices = append(inv.Devices, &nodepb.DeviceInventory{Index: int32(i), Name: m.Preset.Device,
			TotalBytes: m.Preset.TotalBytes, FreeBytes: m.Preset.TotalBytes, BudgetBytes: m.Preset.TotalBytes * 9 / 10})
	}
	return inv
}

// spawnLocalGateway spawns a gateway over one simulated H100 with members
// as its membership, named GatewayName in a local actor system (no
// remote), and returns a Client whose requests to the system's address
// stay in the process.
func spawnLocalGateway(tb testing.TB, machine string, members Membership) (*Client, string) {
	tb.Helper()
	group := simgroup.Open(tb, simgroup.Machine(tb, machine))
	system := testkit.NewActorSystem(tb)
	place := localPlacer(tb, system, members)
	gw := newGateway(group, members, place, Member{ID: "local", Address: system.Address()}, time.Now, 10*time.Second, testkit.Discard)
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return gw }), GatewayName)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = system.Root.StopFuture(pid).Wait() })
	return NewClient(system, 10*time.Second), system.Address()
}

// deepSeekV3 is examples/configs/deepseek-v3.json.
func deepSeekV3(tb testing.TB) []byte {
	tb.Helper()
	b, err := os.ReadFile("../../examples/configs/deepseek-v3.json")
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// benchPlace asks the gateway at address to place DeepSeek-V3 b.N times
// and reports the answers' latency.
func benchPlace(b *testing.B, client *Client, address string, wantFirst int64) {
	req := &nodepb.PlaceRequest{ConfigJson: deepSeekV3(b)}
	ctx := context.Background()
	var lat latencies
	for b.Loop() {
		start := time.Now()
		r, err := client.Place(ctx, address, req)
		lat.add(time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		ps := r.GetPlacements()
		if len(ps) == 0 || ps[0].GetGpus() != wantFirst {
			b.Fatalf("%d placements, the first %v; want %d GPUs first", len(ps), ps[0], wantFirst)
		}
	}
	lat.report(b, "")
}

// simulatedMembers are n simulated members of 8×H200 (the third a 4×H100
// when n is 3: BenchmarkCluster's machines).
func simulatedMembers(b *testing.B, n int) fixedMembership {
	var invs fixedMembership
	for i := range n {
		machine := "8xh200"
		if n == 3 && i == 2 {
			machine = "4xh100-80gb"
		}
		invs = append(invs, simulatedInventory(b, fmt.Sprintf("10.0.0.%d:7700", i+1), machine))
	}
	return invs
}

// BenchmarkPlaceLocal is the placement answer through a gateway in the
// process (no transport) and its placement call to a placement grain over
// simulated members: the 3 nodes of BenchmarkCluster (8×H200, 8×H200,
// 4×H100), where TP8 on one H200 node ranks first, and 32 nodes of
// 8×H200, where PP6 over six nodes' single GPUs does (fewest GPUs first:
// Place's ranking).
func BenchmarkPlaceLocal(b *testing.B) {
	for _, tc := range []struct {
		n         int
		wantFirst int64
	}{{3, 8}, {32, 6}} {
		b.Run(fmt.Sprintf("members=%d", tc.n), func(b *testing.B) {
			client, address := spawnLocalGateway(b, "1xh100-80gb", simulatedMembers(b, tc.n))
			benchPlace(b, client, address, tc.wantFirst)
		})
	}
}

// BenchmarkReserveDuringPlacement is BenchmarkReserveLocal while another
// goroutine places DeepSeek-V3 over 32 simulated members back to back
// through the same gateway: the reserves' latency beside placements that
// take about a second each, which run in placement calls outside the
// gateway's mailbox.
func BenchmarkReserveDuringPlacement(b *testing.B) {
	client, address := spawnLocalGateway(b, "1xh100-80gb", simulatedMembers(b, 32))
	stop := make(chan struct{})
	var placing sync.WaitGroup
	placing.Go(func() {
		req := &nodepb.PlaceRequest{ConfigJson: deepSeekV3(b)}
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := client.Place(context.Background(), address, req); err != nil {
				b.Error(err)
				return
			}
		}
	})
	benchReserve(b, client, address)
	close(stop)
	placing.Wait()
}

// BenchmarkReserveLocal is a reserve and its release through a Client to a
// gateway in the process (no transport), the reference for
// BenchmarkCluster/reserve-remote; the metrics are the reserve's alone.
func BenchmarkReserveLocal(b *testing.B) {
	client, address := spawnLocalGateway(b, "1xh100-80gb", fixedMembership{})
	benchReserve(b, client, address)
}

// benchReserve reserves 64 MiB on device 0 of the node at address under a
// new key and releases it, b.N times, reporting the reserve's latency.
func benchReserve(b *testing.B, client *Client, address string) {
	ctx := context.Background()
	var lat latencies
	i := 0
	for b.Loop() {
		i++
		key := fmt.Sprintf("bench/%d", i)
		start := time.Now()
		_, err := client.Reserve(ctx, address, &nodepb.ReserveRequest{Key: key, Device: 0, Bytes: 64 << 20, TtlMs: 60_000})
		lat.add(time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		if ok, err := client.Release(ctx, address, key); !ok || err != nil {
			b.Fatalf("release %s: %v, %v", key, ok, err)
		}
	}
	lat.report(b, "reserve-")
}

// BenchmarkCluster runs three node processes on loopback (the Static
// provider; 8×H200, 8×H200, 4×H100; gossip every 100 ms) once, and under
// it: the placement answer of DeepSeek-V3 from node 0 over the wire, the
// time a reservation on node 1 takes to show in node 0's cluster
// inventory, and the reserve round trip to node 1.
func BenchmarkCluster(b *testing.B) {
	ports := freePorts(b, 3)
	var seeds []string
	for _, p := range ports {
		seeds = append(seeds, fmt.Sprintf("127.0.0.1:%d", p))
	}
	machines := []string{"8xh200", "8xh200", "4xh100-80gb"}
	nodes := make([]*child, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			nodes[i], errs[i] = startChild(b, childSpec{GRPCPort: ports[i], Seeds: seeds, Machine: machines[i], Refresh: testRefresh, Static: true})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	client := newTestClient(b)
	ctx := context.Background()
	testkit.Eventually(b, 20*time.Second, "the cluster formed", func() error {
		invs, err := client.ClusterInventory(ctx, nodes[0].address)
		if err == nil && len(invs) != 3 {
			err = fmt.Errorf("node 0 sees %v", addresses(invs))
		}
		return err
	})

	b.Run("place/nodes=3", func(b *testing.B) { benchPlace(b, client, nodes[0].address, 8) })
	b.Run("inventory-propagation", func(b *testing.B) { benchPropagation(b, client, nodes[1].address, nodes[0].address) })
	b.Run("reserve-remote", func(b *testing.B) { benchReserve(b, client, nodes[1].address) })
}

// benchPropagation reserves on the node at on, asks the node at seen for
// its cluster inventory back to back until the reservation shows, and
// releases; the metrics are the time from the reserve's answer to the
// first inventory that holds it.
func benchPropagation(b *testing.B, client *Client, on, seen string) {
	ctx := context.Background()
	var lat latencies
	i := 0
	for b.Loop() {
		i++
		key := fmt.Sprintf("bench/propagation/%d", i)
		r, err := client.Reserve(ctx, on, &nodepb.ReserveRequest{Key: key, Device: 0, Bytes: 1 << 30, TtlMs: 60_000})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for {
			invs, err := client.ClusterInventory(ctx, seen)
			if err != nil {
				b.Fatal(err)
			}
			if heldBy(invs, on, 0, r.GetOwner()) == 1<<30 {
				break
			}
			if time.Since(start) > 10*time.Second {
				b.Fatalf("%s not in %s's view after 10 s", key, seen)
			}
		}
		lat.add(time.Since(start))
		if ok, err := client.Release(ctx, on, key); !ok || err != nil {
			b.Fatalf("release %s: %v, %v", key, ok, err)
		}
	}
	lat.report(b, "")
}
