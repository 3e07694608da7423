package node

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/gpuarena/gpuarena/internal/nodepb"
)

// Client asks nodes' gateways over protoactor-go's remote, from an actor
// system whose remote the caller started. Every call takes the node's
// address ("host:port") and waits at most the context's deadline or the
// client's timeout, whichever is sooner. A call that times out may still
// have been done: Reserve again with the same key, which returns the
// reservation made.
type Client struct {
	root    *actor.RootContext
	timeout time.Duration
}

// NewClient returns a client sending from system, waiting at most timeout
// for each answer.
func NewClient(system *actor.ActorSystem, timeout time.Duration) *Client {
	return &Client{root: system.Root, timeout: timeout}
}

// GatewayPID is the gateway actor of the node at address.
func GatewayPID(address string) *actor.PID { return actor.NewPID(address, GatewayName) }

// ask sends msg to the node at address and returns its answer as R.
func ask[R proto.Message](ctx context.Context, c *Client, address string, msg proto.Message) (R, error) {
	var zero R
	timeout := c.timeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d))
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	res, err := c.root.RequestFuture(GatewayPID(address), msg, timeout).Result()
	if err != nil {
		return zero, fmt.Errorf("node %s: %s: %w", address, proto.MessageName(msg).Name(), err)
	}
	if e, ok := res.(*nodepb.Error); ok {
		return zero, remoteError(address, e)
	}
	r, ok := res.(R)
	if !ok {
		return zero, fmt.Errorf("node %s: %s answered %T: %w", address, proto.MessageName(msg).Name(), res, ErrUnknownMessage)
	}
	return r, nil
}

// Inventory is the node's own inventory, taken when asked.
func (c *Client) Inventory(ctx context.Context, address string) (*nodepb.Inventory, error) {
	r, err := ask[*nodepb.InventoryResponse](ctx, c, address, &nodepb.InventoryRequest{})
	if err != nil {
		return nil, err
	}
	return r.GetInventory(), remoteError(address, r.GetError())
}

// ClusterInventory is every live member's inventory as the gossip has
// brought it to the node at address, sorted by address.
func (c *Client) ClusterInventory(ctx context.Context, address string) ([]*nodepb.Inventory, error) {
	r, err := ask[*nodepb.ClusterInventoryResponse](ctx, c, address, &nodepb.ClusterInventoryRequest{})
	if err != nil {
		return nil, err
	}
	return r.GetInventories(), remoteError(address, r.GetError())
}

// Reserve reserves req.Bytes on the node's device req.Device under
// req.Key for req.TtlMs. Errors: *RemoteError (gpuarena.ErrOutOfMemory,
// gpuarena.ErrInvalidValue, ErrUnknownDevice, ErrKeyConflict), the
// transport's (a timeout: retry with the same key).
func (c *Client) Reserve(ctx context.Context, address string, req *nodepb.ReserveRequest) (*nodepb.Reservation, error) {
	r, err := ask[*nodepb.ReserveResponse](ctx, c, address, req)
	if err != nil {
		return nil, err
	}
	return r.GetReservation(), remoteError(address, r.GetError())
}

// Release frees key's reservation; false when the node held none.
func (c *Client) Release(ctx context.Context, address, key string) (bool, error) {
	r, err := ask[*nodepb.ReleaseResponse](ctx, c, address, &nodepb.ReleaseRequest{Key: key})
	if err != nil {
		return false, err
	}
	return r.GetReleased(), remoteError(address, r.GetError())
}

// Ledger is the live allocations of the node's device dev.
func (c *Client) Ledger(ctx context.Context, address string, dev int32) (*nodepb.LedgerResponse, error) {
	r, err := ask[*nodepb.LedgerResponse](ctx, c, address, &nodepb.LedgerRequest{Device: dev})
	if err != nil {
		return nil, err
	}
	return r, remoteError(address, r.GetError())
}

// Place asks the node at address where a model can run on the cluster
// (PlaceRequest, PlaceRequestFor): the node hands the request to a
// placement grain, on whichever node the cluster activates it, which
// answers from its node's view of the cluster; the answer names that node
// (AnsweredBy) and holds the placements best first. Errors: *RemoteError
// (gpuarena.ErrInvalidValue for a config or option arena refuses, ErrBusy
// past MaxPlacementCalls, ErrInternal for a grain that did not answer
// within the node's PlaceTimeout), the transport's.
func (c *Client) Place(ctx context.Context, address string, req *nodepb.PlaceRequest) (*nodepb.PlaceResponse, error) {
	r, err := ask[*nodepb.PlaceResponse](ctx, c, address, req)
	if err != nil {
		return nil, err
	}
	return r, remoteError(address, r.GetError())
}
