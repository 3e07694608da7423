package node

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena/internal/nodepb"
	"github.com/gpuarena/gpuarena/internal/testkit"
)

// blockingMembership is a placement grain's membership whose Inventories
// says it was entered (on entered, without waiting for a reader) and then
// waits until release is closed.
type blockingMembership struct {
	entered     chan struct{}
	release     chan struct{}
	releaseOnce sync.Once
	invs        []*nodepb.Inventory
}

func newBlockingMembership(invs ...*nodepb.Inventory) *blockingMembership {
	return &blockingMembership{entered: make(chan struct{}, 1), release: make(chan struct{}), invs: invs}
}

func (b *blockingMembership) Publish(*nodepb.Inventory) {}

func (b *blockingMembership) Inventories() ([]*nodepb.Inventory, error) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.release
	return b.invs, nil
}

// open lets every placement through, once and for all.
func (b *blockingMembership) open() { b.releaseOnce.Do(func() { close(b.release) }) }

// waitEntered waits until a placement is inside Inventories.
func (b *blockingMembership) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-b.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no placement reached the grain's inventories within 10 s")
	}
}

// llamaConfig is examples/configs/llama-3.1-8b.json.
func llamaConfig(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("../../examples/configs/llama-3.1-8b.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReserveIsNotDelayedByASlowPlacement holds a placement inside the
// placement grain (its inventories wait on a channel) and reserves
// meanwhile: the reserve is answered while the placement still waits, so
// the gateway's mailbox does not run placements. The placement then
// answers once let through.
func TestReserveIsNotDelayedByASlowPlacement(t *testing.T) {
	bm := newBlockingMembership(machineInventory(t, "10.0.0.1:7700", "h100-80gb", 2))
	t.Cleanup(bm.open)
	lg := newLocalGatewayPlacing(t, bm)
	placed := lg.system.Root.RequestFuture(lg.pid, &nodepb.PlaceRequest{ConfigJson: llamaConfig(t)}, 30*time.Second)
	bm.waitEntered(t)

	r := askLocal[*nodepb.ReserveResponse](t, lg, &nodepb.ReserveRequest{Key: "during-placement", Bytes: testkit.MiB, TtlMs: 60_000})
	if r.GetError() != nil || r.GetReservation().GetBytes() != testkit.MiB {
		t.Fatalf("reserve while a placement waits: %v", r)
	}
	if got := ownerBytes(t, lg, 0, ReservationOwnerPrefix+"during-placement"); got != testkit.MiB {
		t.Fatalf("ledger holds %d B for the reservation made during the placement, want %d", got, testkit.MiB)
	}

	bm.open()
	res, err := placed.Result()
	if err != nil {
		t.Fatal(err)
	}
	pr, ok := res.(*nodepb.PlaceResponse)
	if !ok || pr.GetError() != nil || len(pr.GetPlacements()) == 0 || pr.GetAnsweredBy().GetMemberId() != "grain" {
		t.Fatalf("placement after the reserve: %v; want placements answered by the grain", res)
	}
}

// TestPlacementsPastTheLimitAreBusy fills MaxPlacementCalls with
// placements held in the grain: one more is refused with ErrBusy at once,
// the held ones all answer when let through, and the gateway takes
// placements again once their calls have ended.
func TestPlacementsPastTheLimitAreBusy(t *testing.T) {
	bm := newBlockingMembership(machineInventory(t, "10.0.0.1:7700", "h100-80gb", 1))
	t.Cleanup(bm.open)
	lg := newLocalGatewayPlacing(t, bm)
	req := &nodepb.PlaceRequest{ConfigJson: llamaConfig(t)}
	var held []actor.Future
	for range MaxPlacementCalls {
		held = append(held, lg.system.Root.RequestFuture(lg.pid, req, 30*time.Second))
	}
	bm.waitEntered(t)
	busy := askLocal[*nodepb.PlaceResponse](t, lg, req)
	if err := remoteError("local", busy.GetError()); !errors.Is(err, ErrBusy) {
		t.Fatalf("placement %d: %v, want ErrBusy", MaxPlacementCalls+1, err)
	}

	bm.open()
	for i, f := range held {
		res, err := f.Result()
		if pr, ok := res.(*nodepb.PlaceResponse); err != nil || !ok || pr.GetError() != nil || len(pr.GetPlacements()) == 0 {
			t.Fatalf("held placement %d: %v, %v", i, res, err)
		}
	}
	// A call's end reaches the gateway after its answer reaches the caller.
	testkit.Eventually(t, 10*time.Second, "a placement taken again", func() error {
		pr := askLocal[*nodepb.PlaceResponse](t, lg, req)
		if err := remoteError("local", pr.GetError()); err != nil {
			return err
		}
		if len(pr.GetPlacements()) == 0 {
			return fmt.Errorf("no placement in %v", pr)
		}
		return nil
	})
}
