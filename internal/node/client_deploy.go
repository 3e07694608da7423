package node

import (
	"context"
	"time"

	"github.com/gpuarena/gpuarena/internal/nodepb"
)

// MemInfo is the memory of the node's device dev, or of every device when
// dev < 0: free and total bytes (the driver's), the budget and the
// ledger's bytes. Errors: *RemoteError (ErrUnknownDevice), the
// transport's.
func (c *Client) MemInfo(ctx context.Context, address string, dev int32) ([]*nodepb.DeviceMemInfo, error) {
	r, err := ask[*nodepb.MemInfoResponse](ctx, c, address, &nodepb.MemInfoRequest{Device: dev})
	if err != nil {
		return nil, err
	}
	return r.GetDevices(), remoteError(address, r.GetError())
}

// Build deploys one pipeline stage of a model on the node under req.Key
// for req.TtlMs (BuildRequest): each device's arena of its rank, all or
// nothing; a repeat with the same key and arguments returns the same
// deployment and renews it, so a build that timed out is retried with
// its key. RenewLease and Release take the key as for a
// reservation. Errors: *RemoteError (gpuarena.ErrInvalidValue,
// ErrKeyConflict, ErrUnknownDevice, ErrDeviceInUse,
// gpuarena.ErrOutOfMemory), the transport's.
func (c *Client) Build(ctx context.Context, address string, req *nodepb.BuildRequest) (*nodepb.Deployment, error) {
	r, err := ask[*nodepb.DeploymentResponse](ctx, c, address, req)
	if err != nil {
		return nil, err
	}
	return r.GetDeployment(), remoteError(address, r.GetError())
}

// Load loads the weights of the model folder modelDir (a path on the
// node) into deployment key: each device its rank's shard, all or
// nothing; loading again from the same folder answers as before. Errors:
// *RemoteError (ErrNotFound, ErrKeyConflict for another folder,
// gpuarena.ErrInvalidValue for a folder that does not exist or holds
// another model, gpuarena.ErrOutOfMemory), the transport's.
func (c *Client) Load(ctx context.Context, address, key, modelDir string) (*nodepb.Deployment, error) {
	r, err := ask[*nodepb.DeploymentResponse](ctx, c, address, &nodepb.LoadRequest{Key: key, ModelDir: modelDir})
	if err != nil {
		return nil, err
	}
	return r.GetDeployment(), remoteError(address, r.GetError())
}

// RenewLease extends key's lease by ttl from now, whichever the key
// names: a reservation (returned first, as Renew returns it) or a
// deployment (second); the other is nil. Errors: *RemoteError
// (ErrNotFound once the lease lapsed), the transport's.
func (c *Client) RenewLease(ctx context.Context, address, key string, ttl time.Duration) (*nodepb.Reservation, *nodepb.Deployment, error) {
	r, err := ask[*nodepb.ReserveResponse](ctx, c, address, &nodepb.RenewRequest{Key: key, TtlMs: ttl.Milliseconds()})
	if err != nil {
		return nil, nil, err
	}
	return r.GetReservation(), r.GetDeployment(), remoteError(address, r.GetError())
}
