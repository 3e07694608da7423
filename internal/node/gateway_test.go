package node

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/nodepb"
	"github.com/gpuarena/gpuarena/internal/testkit"
	"github.com/gpuarena/gpuarena/internal/testkit/simgroup"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fakeMembership records what the gateway publishes.
type fakeMembership struct {
	mu   sync.Mutex
	last *nodepb.Inventory
	n    int
}

func (f *fakeMembership) Publish(inv *nodepb.Inventory) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last, f.n = inv, f.n+1
}

func (f *fakeMembership) Inventories() ([]*nodepb.Inventory, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last == nil {
		return nil, nil
	}
	return []*nodepb.Inventory{f.last}, nil
}

// localGateway is a gateway over two simulated H100s in a local actor
// system (no remote), with a fake clock and membership.
type localGateway struct {
	system  *actor.ActorSystem
	pid     *actor.PID
	clock   *fakeClock
	members *fakeMembership
	group   *gpuarena.Group
}

func newLocalGateway(t testing.TB) *localGateway { return newLocalGatewayPlacing(t, nil) }

// newLocalGatewayPlacing is newLocalGateway whose placement grain reads
// grainMembers (nil: the gateway's fake membership).
func newLocalGatewayPlacing(t testing.TB, grainMembers Membership) *localGateway {
	t.Helper()
	return newLocalGatewayOn(t, simgroup.Machine(t, "2xh100-80gb"), grainMembers)
}

// newLocalGatewayOn is newLocalGatewayPlacing on the simulated machine mc
// (its fault plans included).
func newLocalGatewayOn(t testing.TB, mc gpuworker.MachineConfig, grainMembers Membership) *localGateway {
	t.Helper()
	group := simgroup.Open(t, mc)
	lg := &localGateway{system: testkit.NewActorSystem(t), clock: &fakeClock{now: time.Unix(1_000_000, 0)},
		members: &fakeMembership{}, group: group}
	if grainMembers == nil {
		grainMembers = lg.members
	}
	place := localPlacer(t, lg.system, grainMembers)
	gw := newGateway(group, lg.members, place, Member{ID: "m1", Address: "local"}, lg.clock.Now, 10*time.Second, testkit.Discard)
	lg.pid = lg.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return gw }))
	t.Cleanup(func() { _ = lg.system.Root.StopFuture(lg.pid).Wait() })
	return lg
}

// localPlacer spawns a placement grain over members in system, without a
// cluster, stopped when the test ends, and returns a placer that asks it.
func localPlacer(tb testing.TB, system *actor.ActorSystem, members Membership) placer {
	tb.Helper()
	grain := &placementGrain{members: members, self: Member{ID: "grain", Address: system.Address()}, logger: testkit.Discard}
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return grain }))
	tb.Cleanup(func() { _ = system.Root.StopFuture(pid).Wait() })
	return func(m *nodepb.PlaceRequest) *nodepb.PlaceResponse {
		res, err := system.Root.RequestFuture(pid, m, 30*time.Second).Result()
		if err != nil {
			return &nodepb.PlaceResponse{Error: wireError(err)}
		}
		return res.(*nodepb.PlaceResponse)
	}
}

// ask sends msg and returns the answer as R.
func askLocal[R any](t *testing.T, lg *localGateway, msg any) R {
	t.Helper()
	res, err := lg.system.Root.RequestFuture(lg.pid, msg, 10*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	r, ok := res.(R)
	if !ok {
		t.Fatalf("answer %T, want %T", res, r)
	}
	return r
}

// ownerBytes is what owner holds on device dev per the ledger.
func ownerBytes(t *testing.T, lg *localGateway, dev int32, owner string) int64 {
	t.Helper()
	led := askLocal[*nodepb.LedgerResponse](t, lg, &nodepb.LedgerRequest{Device: dev})
	var n int64
	for _, e := range led.GetEntries() {
		if e.GetOwner() == owner {
			n += e.GetBytes()
		}
	}
	return n
}

func TestReserveIsIdempotentAndLeased(t *testing.T) {
	lg := newLocalGateway(t)
	req := &nodepb.ReserveRequest{Key: "job-1", Device: 1, Bytes: 64 * testkit.MiB, TtlMs: 1000, Label: "kv"}
	first := askLocal[*nodepb.ReserveResponse](t, lg, req)
	if first.GetError() != nil {
		t.Fatal(first.GetError())
	}
	lg.clock.Advance(500 * time.Millisecond)
	again := askLocal[*nodepb.ReserveResponse](t, lg, req)
	if again.GetError() != nil {
		t.Fatal(again.GetError())
	}
	if got, want := again.GetReservation().GetExpiresUnixMs()-first.GetReservation().GetExpiresUnixMs(), int64(500); got != want {
		t.Errorf("a repeated reserve moved the lease by %d ms, want %d (renewed from now)", got, want)
	}
	owner := ReservationOwnerPrefix + "job-1"
	if got := ownerBytes(t, lg, 1, owner); got != 64*testkit.MiB {
		t.Fatalf("device 1 ledger holds %d B for %s after two reserves of one key, want %d", got, owner, 64*testkit.MiB)
	}
	if got := ownerBytes(t, lg, 0, owner); got != 0 {
		t.Fatalf("device 0 holds %d B for %s, want 0", got, owner)
	}
	conflict := askLocal[*nodepb.ReserveResponse](t, lg, &nodepb.ReserveRequest{Key: "job-1", Device: 1, Bytes: 1, TtlMs: 1000, Label: "kv"})
	if err := remoteError("local", conflict.GetError()); !errors.Is(err, ErrKeyConflict) {
		t.Fatalf("reserve of a used key with other bytes: %v, want ErrKeyConflict", err)
	}
	lg.clock.Advance(999 * time.Millisecond)
	lg.system.Root.Send(lg.pid, leaseTick{})
	if got := ownerBytes(t, lg, 1, owner); got != 64*testkit.MiB {
		t.Fatalf("lease freed 1 ms early: %d B left", got)
	}
	lg.clock.Advance(time.Millisecond)
	lg.system.Root.Send(lg.pid, leaseTick{})
	if got := ownerBytes(t, lg, 1, owner); got != 0 {
		t.Fatalf("lapsed lease still holds %d B", got)
	}
	renew := askLocal[*nodepb.ReserveResponse](t, lg, &nodepb.RenewRequest{Key: "job-1", TtlMs: 1000})
	if err := remoteError("local", renew.GetError()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("renew of a lapsed lease: %v, want ErrNotFound", err)
	}
}

func TestReserveRefusals(t *testing.T) {
	lg := newLocalGateway(t)
	for _, tc := range []struct {
		name string
		req  *nodepb.ReserveRequest
		want error
	}{
		{"no key", &nodepb.ReserveRequest{Bytes: 1, TtlMs: 1000}, gpuarena.ErrInvalidValue},
		{"zero bytes", &nodepb.ReserveRequest{Key: "k", TtlMs: 1000}, gpuarena.ErrInvalidValue},
		{"ttl too short", &nodepb.ReserveRequest{Key: "k", Bytes: 1, TtlMs: 1}, gpuarena.ErrInvalidValue},
		{"ttl too long", &nodepb.ReserveRequest{Key: "k", Bytes: 1, TtlMs: int64(MaxLeaseTTL/time.Millisecond) + 1}, gpuarena.ErrInvalidValue},
		{"label too long", &nodepb.ReserveRequest{Key: "k", Bytes: 1, TtlMs: 1000, Label: string(make([]byte, MaxLabelBytes+1))}, gpuarena.ErrInvalidValue},
		{"no such device", &nodepb.ReserveRequest{Key: "k", Device: 2, Bytes: 1, TtlMs: 1000}, ErrUnknownDevice},
		{"past the budget", &nodepb.ReserveRequest{Key: "k", Bytes: 80 << 30, TtlMs: 1000}, gpuarena.ErrOutOfMemory},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := askLocal[*nodepb.ReserveResponse](t, lg, tc.req)
			err := remoteError("local", r.GetError())
			if !errors.Is(err, tc.want) {
				t.Fatalf("reserve: %v, want %v", err, tc.want)
			}
			if r.GetReservation() != nil {
				t.Fatalf("a refused reserve returned %v", r.GetReservation())
			}
		})
	}
	oom := askLocal[*nodepb.ReserveResponse](t, lg, &nodepb.ReserveRequest{Key: "k", Bytes: 80 << 30, TtlMs: 1000}).GetError()
	if oom.GetRequestedBytes() != 80<<30 || oom.GetAvailableBytes() <= 0 || oom.GetAvailableBytes() >= 80<<30 {
		t.Fatalf("out of memory carries requested %d B, available %d B; want %d and a positive budget below it",
			oom.GetRequestedBytes(), oom.GetAvailableBytes(), int64(80<<30))
	}
	for d := range int32(2) {
		if led := askLocal[*nodepb.LedgerResponse](t, lg, &nodepb.LedgerRequest{Device: d}); led.GetCurrentBytes() != 0 {
			t.Fatalf("device %d holds %d B after refusals, want 0", d, led.GetCurrentBytes())
		}
	}
	unknown := askLocal[*nodepb.Error](t, lg, &nodepb.Inventory{})
	if !errors.Is(remoteError("local", unknown), ErrUnknownMessage) {
		t.Fatalf("an Inventory sent as a request: %v, want ErrUnknownMessage", unknown)
	}
}

func TestReleaseAndInventory(t *testing.T) {
	lg := newLocalGateway(t)
	r := askLocal[*nodepb.ReserveResponse](t, lg, &nodepb.ReserveRequest{Key: "a", Device: 0, Bytes: 3 * testkit.MiB, TtlMs: 60_000})
	if r.GetError() != nil {
		t.Fatal(r.GetError())
	}
	inv := askLocal[*nodepb.InventoryResponse](t, lg, &nodepb.InventoryRequest{}).GetInventory()
	if len(inv.GetDevices()) != 2 {
		t.Fatalf("inventory of %d devices, want 2", len(inv.GetDevices()))
	}
	d0 := inv.GetDevices()[0]
	if d0.GetUsedBytes() != 3*testkit.MiB || len(d0.GetOwners()) != 1 || d0.GetOwners()[0].GetOwner() != ReservationOwnerPrefix+"a" ||
		d0.GetTotalBytes() <= d0.GetBudgetBytes() || d0.GetName() == "" {
		t.Fatalf("device 0 inventory %v: want 3 MiB used by %sa, a name, budget below total", d0, ReservationOwnerPrefix)
	}
	pf := askLocal[*nodepb.PreflightResponse](t, lg, &nodepb.PreflightRequest{Device: 0, Bytes: 1})
	if !pf.GetFits() || pf.GetAvailableBytes() != d0.GetBudgetBytes()-3*testkit.MiB {
		t.Fatalf("preflight %v: want fits with budget − 3 MiB = %d B", pf, d0.GetBudgetBytes()-3*testkit.MiB)
	}
	if rel := askLocal[*nodepb.ReleaseResponse](t, lg, &nodepb.ReleaseRequest{Key: "a"}); !rel.GetReleased() || rel.GetError() != nil {
		t.Fatalf("release: %v", rel)
	}
	if rel := askLocal[*nodepb.ReleaseResponse](t, lg, &nodepb.ReleaseRequest{Key: "a"}); rel.GetReleased() || rel.GetError() != nil {
		t.Fatalf("second release: %v, want released false and no error", rel)
	}
	lg.members.mu.Lock()
	last := lg.members.last
	lg.members.mu.Unlock()
	if last.GetDevices()[0].GetUsedBytes() != 0 || last.GetVersion() != 2 {
		t.Fatalf("last published inventory %v: want device 0 empty at version 2 (reserve, release)", last)
	}
	if led, _ := lg.group.Rank(0).Ledger(context.Background()); led.Counters.CurrentBytes != 0 {
		t.Fatalf("device 0 holds %d B after release", led.Counters.CurrentBytes)
	}
}
