package node

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/nodepb"
	"github.com/gpuarena/gpuarena/internal/testkit"
	"github.com/gpuarena/gpuarena/internal/testkit/simgroup"
)

// directGateway is a gateway called without its actor, over two small
// simulated devices of 64 MiB, with a fake clock.
func directGateway(t testing.TB) (*gateway, *fakeClock) {
	t.Helper()
	mc := gpuworker.MachineConfig{Devices: []gpuworker.HostSimConfig{
		{Name: "hostsim small", TotalBytes: 64 * testkit.MiB}, {Name: "hostsim small", TotalBytes: 64 * testkit.MiB}}}
	group := simgroup.Open(t, mc)
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	return newGateway(group, &fakeMembership{}, nil, Member{ID: "m", Address: "local"}, clock.Now, 10*time.Second, testkit.Discard), clock
}

// modelLease is the model's view of one reservation.
type modelLease struct {
	device  int32
	bytes   int64
	expires time.Time
}

// TestGatewayAgainstModel runs random reserves, renews, releases, clock
// steps and lease checks against the gateway and a map of leases, and
// checks after every step that each device's ledger holds exactly the
// model's reservations.
func TestGatewayAgainstModel(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			g, clock := directGateway(t)
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(seed, 20))
			model := map[string]modelLease{}
			budget := []int64{g.group.Rank(0).Budget(), g.group.Rank(1).Budget()}
			for step := range 300 {
				key := fmt.Sprintf("k%d", rng.IntN(6))
				switch op := rng.IntN(5); op {
				case 0: // reserve
					dev, bytes, ttl := int32(rng.IntN(2)), int64(1+rng.IntN(24))*testkit.MiB, int64(100+rng.IntN(900))
					_, err := g.reserve(ctx, &nodepb.ReserveRequest{Key: key, Device: dev, Bytes: bytes, TtlMs: ttl})
					l, held := model[key]
					var used int64
					for _, m := range model {
						if m.device == dev {
							used += m.bytes
						}
					}
					switch {
					case held && (l.device != dev || l.bytes != bytes):
						if !errors.Is(err, ErrKeyConflict) {
							t.Fatalf("step %d: reserve of %s with other arguments: %v, want ErrKeyConflict", step, key, err)
						}
					case held:
						if err != nil {
							t.Fatalf("step %d: repeated reserve of %s: %v", step, key, err)
						}
						l.expires = clock.Now().Add(time.Duration(ttl) * time.Millisecond)
						model[key] = l
					case used+bytes > budget[dev]:
						if !errors.Is(err, gpuarena.ErrOutOfMemory) {
							t.Fatalf("step %d: reserve of %d B on device %d holding %d B of %d: %v, want ErrOutOfMemory", step, bytes, dev, used, budget[dev], err)
						}
					default:
						if err != nil {
							t.Fatalf("step %d: reserve of %d B on device %d holding %d B of %d: %v", step, bytes, dev, used, budget[dev], err)
						}
						model[key] = modelLease{device: dev, bytes: bytes, expires: clock.Now().Add(time.Duration(ttl) * time.Millisecond)}
					}
				case 1: // renew
					_, err := g.renew(&nodepb.RenewRequest{Key: key, TtlMs: 500})
					if l, held := model[key]; held {
						if err != nil {
							t.Fatalf("step %d: renew of %s: %v", step, key, err)
						}
						l.expires = clock.Now().Add(500 * time.Millisecond)
						model[key] = l
					} else if !errors.Is(err, ErrNotFound) {
						t.Fatalf("step %d: renew of absent %s: %v, want ErrNotFound", step, key, err)
					}
				case 2: // release
					released, err := g.release(ctx, key)
					_, held := model[key]
					if err != nil || released != held {
						t.Fatalf("step %d: release of %s: %v, %v; want released %v", step, key, released, err, held)
					}
					delete(model, key)
				case 3: // time passes
					clock.Advance(time.Duration(rng.IntN(400)) * time.Millisecond)
				case 4: // the lease check
					g.expire(ctx)
					for k, l := range model {
						if !clock.Now().Before(l.expires) {
							delete(model, k)
						}
					}
				}
				checkLedgers(t, g, model, step)
			}
		})
	}
}

// checkLedgers fails unless each device's ledger holds exactly the model's
// reservations, each under its owner.
func checkLedgers(t *testing.T, g *gateway, model map[string]modelLease, step int) {
	t.Helper()
	for dev := range int32(2) {
		led := g.ledger(context.Background(), dev)
		got := map[string]int64{}
		for _, e := range led.GetEntries() {
			got[e.GetOwner()] += e.GetBytes()
		}
		want := map[string]int64{}
		for k, l := range model {
			if l.device == dev {
				want[ReservationOwnerPrefix+k] = l.bytes
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("step %d: device %d ledger %v, model %v", step, dev, got, want)
		}
	}
}

// FuzzReserve sends arbitrary reserve requests (decoded from the fuzzer's
// bytes) and checks that each either is refused and allocates nothing or
// holds exactly its bytes, and that releasing it empties the ledger.
func FuzzReserve(f *testing.F) {
	for _, r := range []*nodepb.ReserveRequest{
		{Key: "k", Bytes: 1 << 20, TtlMs: 1000},
		{Key: "k", Device: 1, Bytes: 1 << 40, TtlMs: 1000},
		{Key: "", Bytes: -1, TtlMs: -5, Device: -3},
	} {
		f.Add(r.GetKey(), r.GetDevice(), r.GetBytes(), r.GetTtlMs(), r.GetLabel())
	}
	g, _ := directGateway(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, key string, dev int32, bytes, ttl int64, label string) {
		res, err := g.reserve(ctx, &nodepb.ReserveRequest{Key: key, Device: dev, Bytes: bytes, TtlMs: ttl, Label: label})
		if err == nil && (res.GetBytes() != bytes || res.GetDevice() != dev || res.GetOwner() != ReservationOwnerPrefix+key) {
			t.Fatalf("reservation %v for %d B on device %d", res, bytes, dev)
		}
		if w := wireError(err); err != nil && w.GetCode() == nodepb.ErrorCode_ERROR_CODE_INTERNAL {
			t.Fatalf("reserve refused without a code: %v", err)
		}
		if _, err := g.release(ctx, key); err != nil {
			t.Fatal(err)
		}
		for d := range int32(2) {
			if led := g.ledger(ctx, d); led.GetCurrentBytes() != 0 {
				t.Fatalf("device %d holds %d B after the release", d, led.GetCurrentBytes())
			}
		}
	})
}
