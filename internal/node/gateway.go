package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/internal/nodepb"
)

// GatewayName is the name the gateway actor is spawned under on every
// node: a node at address A answers at actor.NewPID(A, GatewayName).
const GatewayName = "gpuarena-node"

// ReservationOwnerPrefix starts the ledger owner of every reservation: the
// reservation key k is held by owner ReservationOwnerPrefix + k.
const ReservationOwnerPrefix = "reservation/"

// Limits on a reservation's arguments, checked before anything is
// allocated.
const (
	// MaxKeyBytes is the longest reservation key, in bytes.
	MaxKeyBytes = 256
	// MaxLabelBytes is the longest ledger label, in bytes.
	MaxLabelBytes = 128
	// MinLeaseTTL and MaxLeaseTTL bound a lease's time to live.
	MinLeaseTTL = 100 * time.Millisecond
	MaxLeaseTTL = 24 * time.Hour
)

// leaseTick asks the gateway to free the reservations and deployments
// whose lease lapsed, and the devices failed builds left (retryFailedBuilds).
type leaseTick struct{}

// publishTick asks the gateway to publish its inventory again.
type publishTick struct{}

// lease is one reservation and the allocation that holds its memory.
type lease struct {
	res     *nodepb.Reservation
	alloc   device.Allocation
	expires time.Time
}

// gateway is the node's actor: it takes nodepb messages (local or remote),
// calls the device managers of group for them, and owns the reservations
// and the deployments; its mailbox serialises every change to them, so it
// needs no lock. A placement is not computed here: the gateway hands it to a placement call
// (startPlace) that asks a placement grain through place.
type gateway struct {
	group       *gpuarena.Group
	members     Membership
	place       placer
	self        Member
	now         func() time.Time
	callTimeout time.Duration
	logger      *slog.Logger

	leases      map[string]*lease
	deployments map[string]*deployment
	retired     map[int32]string // devices whose deployment's release failed part-way: its key
	version     uint64
	placing     map[string]bool // the placement calls under way, by PID id
}

// newGateway returns the gateway of group, publishing through members and
// answering placements through place.
func newGateway(group *gpuarena.Group, members Membership, place placer, self Member, now func() time.Time, callTimeout time.Duration, logger *slog.Logger) *gateway {
	return &gateway{group: group, members: members, place: place, self: self, now: now, callTimeout: callTimeout,
		logger: logger, leases: make(map[string]*lease), deployments: make(map[string]*deployment), retired: make(map[int32]string),
		placing: make(map[string]bool)}
}

// Receive answers one message. A request whose sender is gone is handled
// all the same (a reservation made for a caller that timed out stays until
// its lease lapses, so a retry with its key finds it).
func (g *gateway) Receive(c actor.Context) {
	ctx, cancel := context.WithTimeout(context.Background(), g.callTimeout)
	defer cancel()
	switch m := c.Message().(type) {
	case *actor.Started:
		g.publish(ctx)
	case *actor.Stopping, *actor.Stopped, *actor.Restarting:
	case leaseTick:
		reservations, deployments, retried := g.expire(ctx), g.expireDeployments(ctx), g.retryFailedBuilds(ctx)
		if reservations || deployments || retried {
			g.publish(ctx)
		}
	case publishTick:
		g.publish(ctx)
	case *nodepb.InventoryRequest:
		inv, err := g.inventory(ctx)
		respond(c, &nodepb.InventoryResponse{Inventory: inv, Error: wireError(err)})
	case *nodepb.ClusterInventoryRequest:
		invs, err := g.members.Inventories()
		respond(c, &nodepb.ClusterInventoryResponse{Inventories: invs, Error: wireError(err)})
	case *nodepb.ReserveRequest:
		res, err := g.reserve(ctx, m)
		respond(c, &nodepb.ReserveResponse{Reservation: res, Error: wireError(err)})
		if err == nil {
			g.publish(ctx)
		}
	case *nodepb.RenewRequest:
		respond(c, g.renewAny(m))
	case *nodepb.ReleaseRequest:
		released, err := g.release(ctx, m.GetKey())
		respond(c, &nodepb.ReleaseResponse{Released: released, Error: wireError(err)})
		if released {
			g.publish(ctx)
		}
	case *nodepb.BuildRequest:
		dep, err := g.build(ctx, m)
		respond(c, &nodepb.DeploymentResponse{Deployment: dep, Error: wireError(err)})
		if err == nil {
			g.publish(ctx)
		}
	case *nodepb.LoadRequest:
		dep, err := g.load(ctx, m)
		respond(c, &nodepb.DeploymentResponse{Deployment: dep, Error: wireError(err)})
		if err == nil {
			g.publish(ctx)
		}
	case *nodepb.MemInfoRequest:
		respond(c, g.memInfo(ctx, m.GetDevice()))
	case *nodepb.LedgerRequest:
		respond(c, g.ledger(ctx, m.GetDevice()))
	case *nodepb.PreflightRequest:
		respond(c, g.preflight(ctx, m))
	case *nodepb.PlaceRequest:
		g.startPlace(c, m)
	case *actor.Terminated: // a placement call ended
		delete(g.placing, m.GetWho().GetId())
	default:
		g.logger.Warn("gpuarena node: message refused", "type", fmt.Sprintf("%T", m), "sender", c.Sender())
		respond(c, &nodepb.Error{Code: nodepb.ErrorCode_ERROR_CODE_UNKNOWN_MESSAGE,
			Message: fmt.Sprintf("message %T is not one the node gateway takes (gpuarena.node.v1 requests only)", m)})
	}
}

// respond answers the sender, if there is one.
func respond(c actor.Context, m proto.Message) {
	if c.Sender() != nil {
		c.Respond(m)
	}
}

// rank returns device i's manager, or ErrUnknownDevice naming the devices.
func (g *gateway) rank(i int32) (*gpuarena.Manager, error) {
	if i < 0 || int(i) >= g.group.Ranks() {
		return nil, fmt.Errorf("device %d: %w: the node has devices 0 to %d", i, ErrUnknownDevice, g.group.Ranks()-1)
	}
	return g.group.Rank(int(i)), nil
}

// checkReserve refuses a reservation's bad arguments, before anything is
// allocated.
func checkReserve(m *nodepb.ReserveRequest) error {
	switch {
	case m.GetKey() == "" || len(m.GetKey()) > MaxKeyBytes:
		return fmt.Errorf("reserve: key of %d bytes: %w: want 1 to %d bytes", len(m.GetKey()), gpuarena.ErrInvalidValue, MaxKeyBytes)
	case len(m.GetLabel()) > MaxLabelBytes:
		return fmt.Errorf("reserve %q: label of %d bytes: %w: want at most %d", m.GetKey(), len(m.GetLabel()), gpuarena.ErrInvalidValue, MaxLabelBytes)
	case m.GetBytes() <= 0:
		return fmt.Errorf("reserve %q: %d bytes: %w: want > 0", m.GetKey(), m.GetBytes(), gpuarena.ErrInvalidValue)
	}
	return checkTTL("reserve", m.GetKey(), m.GetTtlMs())
}

// checkTTL refuses a lease time to live outside [MinLeaseTTL, MaxLeaseTTL].
func checkTTL(op, key string, ttlMS int64) error {
	ttl := time.Duration(ttlMS) * time.Millisecond
	if ttlMS <= 0 || ttl < MinLeaseTTL || ttl > MaxLeaseTTL {
		return fmt.Errorf("%s %q: ttl %d ms: %w: want %d to %d ms", op, key, ttlMS, gpuarena.ErrInvalidValue,
			MinLeaseTTL.Milliseconds(), MaxLeaseTTL.Milliseconds())
	}
	return nil
}

// reserve makes the reservation m asks for, or returns the one its key
// already holds (renewed) when the arguments are the same.
func (g *gateway) reserve(ctx context.Context, m *nodepb.ReserveRequest) (*nodepb.Reservation, error) {
	if err := checkReserve(m); err != nil {
		return nil, err
	}
	label := m.GetLabel()
	if label == "" {
		label = "reservation"
	}
	if _, ok := g.deployments[m.GetKey()]; ok {
		return nil, fmt.Errorf("reserve %q: %w: the key names a deployment: use another key", m.GetKey(), ErrKeyConflict)
	}
	if l, ok := g.leases[m.GetKey()]; ok {
		r := l.res
		if r.GetDevice() != m.GetDevice() || r.GetBytes() != m.GetBytes() || r.GetLabel() != label {
			return nil, fmt.Errorf("reserve %q: %w: it holds %d B on device %d labelled %q; asked %d B on device %d labelled %q: use another key",
				m.GetKey(), ErrKeyConflict, r.GetBytes(), r.GetDevice(), r.GetLabel(), m.GetBytes(), m.GetDevice(), label)
		}
		return g.extend(l, m.GetTtlMs()), nil
	}
	mgr, err := g.rank(m.GetDevice())
	if err != nil {
		return nil, fmt.Errorf("reserve %q: %w", m.GetKey(), err)
	}
	if d := g.deploymentOn(m.GetDevice()); d != nil {
		return nil, fmt.Errorf("reserve %q: device %d: %w: it holds deployment %q, whose release frees everything on the device", m.GetKey(),
			m.GetDevice(), ErrDeviceInUse, d.dep.GetKey())
	}
	owner := ReservationOwnerPrefix + m.GetKey()
	a, err := mgr.Alloc(ctx, label, m.GetBytes(), gpuarena.WithOwner(owner))
	if err != nil {
		return nil, fmt.Errorf("reserve %q: %d B on device %d: %w", m.GetKey(), m.GetBytes(), m.GetDevice(), err)
	}
	l := &lease{alloc: a, res: &nodepb.Reservation{Key: m.GetKey(), Device: m.GetDevice(), Bytes: m.GetBytes(),
		Label: label, Owner: owner}}
	g.leases[m.GetKey()] = l
	g.version++
	g.logger.Info("gpuarena node: reserved", "key", m.GetKey(), "device", m.GetDevice(), "bytes", m.GetBytes(), "ttl_ms", m.GetTtlMs())
	return g.extend(l, m.GetTtlMs()), nil
}

// extend sets l's lease to ttlMS from now and returns a copy of its
// reservation.
func (g *gateway) extend(l *lease, ttlMS int64) *nodepb.Reservation {
	l.expires = g.now().Add(time.Duration(ttlMS) * time.Millisecond)
	l.res.ExpiresUnixMs = l.expires.UnixMilli()
	l.res.TtlMs = ttlMS
	return proto.CloneOf(l.res)
}

// renew extends the lease of m's key.
func (g *gateway) renew(m *nodepb.RenewRequest) (*nodepb.Reservation, error) {
	if err := checkTTL("renew", m.GetKey(), m.GetTtlMs()); err != nil {
		return nil, err
	}
	l, ok := g.leases[m.GetKey()]
	if !ok {
		return nil, fmt.Errorf("renew %q: %w: reserve (or build) it again", m.GetKey(), ErrNotFound)
	}
	return g.extend(l, m.GetTtlMs()), nil
}

// release frees key's reservation or deployment (releaseDeployment);
// false when the node holds neither.
func (g *gateway) release(ctx context.Context, key string) (bool, error) {
	l, ok := g.leases[key]
	if !ok {
		return g.releaseDeployment(ctx, key)
	}
	if err := g.free(ctx, l); err != nil {
		return false, fmt.Errorf("release %q: %w", key, err)
	}
	g.logger.Info("gpuarena node: released", "key", key)
	return true, nil
}

// free frees l's memory and forgets it. A Free that fails leaves the lease
// in place, so the next tick or release tries again.
func (g *gateway) free(ctx context.Context, l *lease) error {
	mgr, err := g.rank(l.res.GetDevice())
	if err != nil {
		return err
	}
	if err := mgr.Free(ctx, l.alloc); err != nil && !errors.Is(err, gpuarena.ErrClosed) {
		return err
	}
	delete(g.leases, l.res.GetKey())
	g.version++
	return nil
}

// expire frees every reservation whose lease has lapsed, in key order;
// true when one was.
func (g *gateway) expire(ctx context.Context) bool {
	now := g.now()
	var lapsed []*lease
	for _, l := range g.leases {
		if !now.Before(l.expires) {
			lapsed = append(lapsed, l)
		}
	}
	sort.Slice(lapsed, func(i, j int) bool { return lapsed[i].res.GetKey() < lapsed[j].res.GetKey() })
	for _, l := range lapsed {
		if err := g.free(ctx, l); err != nil {
			g.logger.Error("gpuarena node: freeing a lapsed reservation", "key", l.res.GetKey(), "err", err)
			continue
		}
		g.logger.Info("gpuarena node: lease lapsed", "key", l.res.GetKey(), "bytes", l.res.GetBytes())
	}
	return len(lapsed) > 0
}

// ledger answers a LedgerRequest: device's live allocations (views inside
// them not counted again).
func (g *gateway) ledger(ctx context.Context, dev int32) *nodepb.LedgerResponse {
	mgr, err := g.rank(dev)
	if err != nil {
		return &nodepb.LedgerResponse{Error: wireError(fmt.Errorf("ledger: %w", err))}
	}
	led, err := mgr.Ledger(ctx)
	if err != nil {
		return &nodepb.LedgerResponse{Error: wireError(fmt.Errorf("ledger of device %d: %w", dev, err))}
	}
	out := &nodepb.LedgerResponse{CurrentBytes: led.Counters.CurrentBytes}
	for _, e := range led.Entries {
		if e.Parent == 0 {
			out.Entries = append(out.Entries, &nodepb.LedgerEntry{Owner: e.Owner, Label: e.Label, Bytes: e.Bytes})
		}
	}
	return out
}

// preflight answers a PreflightRequest from the device's budget and ledger
// now, allocating nothing.
func (g *gateway) preflight(ctx context.Context, m *nodepb.PreflightRequest) *nodepb.PreflightResponse {
	mgr, err := g.rank(m.GetDevice())
	if err == nil && m.GetBytes() <= 0 {
		err = fmt.Errorf("%d bytes: %w: want > 0", m.GetBytes(), gpuarena.ErrInvalidValue)
	}
	if err != nil {
		return &nodepb.PreflightResponse{Error: wireError(fmt.Errorf("preflight: %w", err))}
	}
	led, err := mgr.Ledger(ctx)
	if err != nil {
		return &nodepb.PreflightResponse{Error: wireError(fmt.Errorf("preflight of device %d: %w", m.GetDevice(), err))}
	}
	avail := max(mgr.Budget()-led.Counters.CurrentBytes, 0)
	return &nodepb.PreflightResponse{Fits: m.GetBytes() <= avail, AvailableBytes: avail}
}
