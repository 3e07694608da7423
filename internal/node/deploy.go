package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"sort"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/nodepb"
)

// deployment is one deployment the node holds: the build request as asked
// (its ttl cleared, to recognise a repeat), what it is, and what the load
// needs to shard the weights as the arenas were sized.
type deployment struct {
	req     *nodepb.BuildRequest
	dep     *nodepb.Deployment
	cfg     *arena.ModelConfig
	layout  arena.ParallelLayout
	wopts   arena.WeightOptions
	expires time.Time
}

// checkBuild refuses a build's bad key, ttl or device count, before
// anything is sized or allocated.
func checkBuild(m *nodepb.BuildRequest) error {
	switch {
	case m.GetKey() == "" || len(m.GetKey()) > MaxKeyBytes:
		return fmt.Errorf("build: key of %d bytes: %w: want 1 to %d bytes", len(m.GetKey()), gpuarena.ErrInvalidValue, MaxKeyBytes)
	case m.GetModel() == nil:
		return fmt.Errorf("build %q: %w: no model (its config_json and options, as a PlaceRequest carries them)", m.GetKey(), gpuarena.ErrInvalidValue)
	}
	return checkTTL("build", m.GetKey(), m.GetTtlMs())
}

// build makes the deployment m asks for, or returns the one its key
// already holds (renewed) when the arguments are the same. It sizes every
// rank of the layout (arena.PlanRanks) and builds, on devices[r], the
// arena of global rank stage·t + r, all or nothing: a rank's plan past its
// device's budget is refused before anything is built, and a build that
// fails on the device releases the arenas built before it (which retires
// those devices, as Manager.Release does); the devices a rollback could not
// release stay refused until a release of key frees them (releaseRetired). Errors: gpuarena.ErrInvalidValue
// (a bad key, ttl, config, option, stage or device list; a layout the
// model does not split), ErrKeyConflict, ErrUnknownDevice, ErrDeviceInUse,
// gpuarena.ErrOutOfMemory (an *gpuworker.OutOfMemoryError), the devices'.
func (g *gateway) build(ctx context.Context, m *nodepb.BuildRequest) (*nodepb.Deployment, error) {
	if err := checkBuild(m); err != nil {
		return nil, err
	}
	key := m.GetKey()
	asked := proto.CloneOf(m)
	asked.TtlMs = 0
	if d, ok := g.deployments[key]; ok {
		if !proto.Equal(d.req, asked) {
			return nil, fmt.Errorf("build %q: %w: it holds a deployment of %s (stage %d on devices %v) built with other arguments: use another key",
				key, ErrKeyConflict, d.dep.GetModelType(), d.dep.GetStage(), d.req.GetDevices())
		}
		return g.extendDeployment(d, m.GetTtlMs()), nil
	}
	if _, ok := g.leases[key]; ok {
		return nil, fmt.Errorf("build %q: %w: the key names a reservation: use another key", key, ErrKeyConflict)
	}
	cfg, opts, fo, po, err := placeArgs(m.GetModel())
	if err != nil {
		return nil, fmt.Errorf("build %q: %w", key, err)
	}
	layout := arena.ParallelLayout{TensorParallelSize: max(po.TensorParallelSize, 1), PipelineParallelSize: max(po.PipelineParallelSize, 1)}
	ranks, err := arena.PlanRanks(cfg, opts, fo.Weights, layout)
	if err != nil {
		return nil, fmt.Errorf("build %q: %w: %w", key, gpuarena.ErrInvalidValue, err)
	}
	devs := m.GetDevices()
	if err := g.checkStage(key, m.GetStage(), devs, layout); err != nil {
		return nil, err
	}
	first := m.GetStage() * layout.TensorParallelSize
	for r, dev := range devs {
		if err := checkArenaFits(g.group.Rank(int(dev)), dev, ranks[first+int64(r)].Plan); err != nil {
			return nil, fmt.Errorf("build %q: rank %d: %w", key, first+int64(r), err)
		}
	}
	if err := g.checkFree(ctx, key, devs); err != nil {
		return nil, err
	}
	dep := &nodepb.Deployment{Key: key, ModelType: cfg.ModelType, TensorParallelSize: layout.TensorParallelSize,
		PipelineParallelSize: layout.PipelineParallelSize, Stage: m.GetStage()}
	for r, dev := range devs {
		mgr := g.group.Rank(int(dev))
		_, err := mgr.BuildArena(ctx, ranks[first+int64(r)].Plan)
		var led device.Ledger
		if err == nil {
			led, err = mgr.Ledger(ctx)
		}
		if err != nil {
			err = fmt.Errorf("build %q: rank %d on device %d: %w", key, first+int64(r), dev, err)
			if rerr := g.releaseDevices(ctx, key, devs[:r+1]); rerr != nil {
				err = errors.Join(err, fmt.Errorf("rolling the build back: %w; the devices stay refused until a release of %q frees them", rerr, key))
			}
			return nil, err
		}
		dep.Devices = append(dep.Devices, &nodepb.DeploymentDevice{Device: dev, Rank: first + int64(r),
			ArenaBytes: led.Owners[device.ArenaOwner].CurrentBytes})
	}
	d := &deployment{req: asked, dep: dep, cfg: cfg, layout: layout, wopts: fo.Weights}
	g.deployments[key] = d
	g.version++
	g.logger.Info("gpuarena node: deployment built", "key", key, "model_type", cfg.ModelType, "layout", layout.String(),
		"stage", m.GetStage(), "devices", devs, "ttl_ms", m.GetTtlMs())
	return g.extendDeployment(d, m.GetTtlMs()), nil
}

// checkStage refuses a stage outside the layout and a device list that is
// not one distinct device of the node per tensor-parallel rank.
func (g *gateway) checkStage(key string, stage int64, devs []int32, layout arena.ParallelLayout) error {
	if stage < 0 || stage >= layout.PipelineParallelSize {
		return fmt.Errorf("build %q: stage %d: %w: pipeline_parallel_size %d has stages 0 to %d", key, stage, gpuarena.ErrInvalidValue,
			layout.PipelineParallelSize, layout.PipelineParallelSize-1)
	}
	if int64(len(devs)) != layout.TensorParallelSize {
		return fmt.Errorf("build %q: %d devices: %w: give one per tensor-parallel rank (tensor_parallel_size %d)", key, len(devs),
			gpuarena.ErrInvalidValue, layout.TensorParallelSize)
	}
	for i, dev := range devs {
		if _, err := g.rank(dev); err != nil {
			return fmt.Errorf("build %q: %w", key, err)
		}
		if slices.Contains(devs[:i], dev) {
			return fmt.Errorf("build %q: devices %v: %w: device %d is named twice", key, devs, gpuarena.ErrInvalidValue, dev)
		}
	}
	return nil
}

// checkFree refuses a device of devs that holds anything (holder).
func (g *gateway) checkFree(ctx context.Context, key string, devs []int32) error {
	for _, dev := range devs {
		holder, err := g.holder(ctx, dev)
		if err != nil {
			return fmt.Errorf("build %q: %w", key, err)
		}
		if holder != "" {
			return fmt.Errorf("build %q: device %d: %w: it holds %s; a deployment takes devices that hold nothing", key, dev, ErrDeviceInUse, holder)
		}
	}
	return nil
}

// checkArenaFits refuses plan when its bytes as pooled (arena.NewPoolLayout
// and the slabs) pass the budget of mgr's device, before any rank is
// built: an *gpuworker.OutOfMemoryError, errors.Is gpuarena.ErrOutOfMemory.
// The device must hold nothing besides (checkFree), so the budget is all
// it has.
func checkArenaFits(mgr *gpuarena.Manager, dev int32, plan *arena.Plan) error {
	pool, err := arena.NewPoolLayout(plan)
	if err != nil {
		return fmt.Errorf("%w: %w", gpuarena.ErrInvalidValue, err)
	}
	bytes := max(pool.Bytes+plan.SlabBytes, plan.TotalBytes)
	if budget := mgr.Budget(); budget > 0 && bytes > budget {
		return &gpuworker.OutOfMemoryError{Label: "arena", Owner: device.ArenaOwner, Bytes: bytes, Device: int(dev),
			DeviceName: mgr.Device().Name, DeviceFree: -1, Budget: budget, OverBudget: true, ShortfallBytes: bytes - budget}
	}
	return nil
}

// holder names what device dev holds that a deployment cannot share it
// with ("" for nothing): a deployment, a deployment or failed build whose
// release failed part-way, a reservation, or anything else in its ledger.
func (g *gateway) holder(ctx context.Context, dev int32) (string, error) {
	if d := g.deploymentOn(dev); d != nil {
		return fmt.Sprintf("deployment %q", d.dep.GetKey()), nil
	}
	if key, ok := g.retired[dev]; ok {
		return fmt.Sprintf("%q, whose release did not finish (release it again; each lease tick also retries a failed build's)", key), nil
	}
	var keys []string
	for k, l := range g.leases {
		if l.res.GetDevice() == dev {
			keys = append(keys, k)
		}
	}
	if len(keys) > 0 {
		sort.Strings(keys)
		return fmt.Sprintf("reservation %q", keys[0]), nil
	}
	led, err := g.group.Rank(int(dev)).Ledger(ctx)
	if err != nil {
		return "", fmt.Errorf("ledger of device %d: %w", dev, err)
	}
	if led.Counters.CurrentBytes > 0 {
		return fmt.Sprintf("%d B of other owners", led.Counters.CurrentBytes), nil
	}
	return "", nil
}

// deploymentOn is the deployment that holds device dev, or nil.
func (g *gateway) deploymentOn(dev int32) *deployment {
	for _, d := range g.deployments {
		for _, dd := range d.dep.GetDevices() {
			if dd.GetDevice() == dev {
				return d
			}
		}
	}
	return nil
}

// extendDeployment sets d's lease to ttlMS from now and returns a copy of
// its deployment.
func (g *gateway) extendDeployment(d *deployment, ttlMS int64) *nodepb.Deployment {
	d.expires = g.now().Add(time.Duration(ttlMS) * time.Millisecond)
	d.dep.ExpiresUnixMs = d.expires.UnixMilli()
	d.dep.TtlMs = ttlMS
	return proto.CloneOf(d.dep)
}

// load loads m.ModelDir's weights on every device of deployment m.Key:
// each device's global rank's shard (Manager.LoadWeightsRank with the
// deployment's layout and weight options), all or nothing (a failure frees
// the shards loaded before it). A deployment loaded from the same folder
// answers as it is. Errors: gpuarena.ErrInvalidValue (no folder, a folder
// that does not exist, or whose config.json is not the deployment's
// model), ErrNotFound, ErrKeyConflict (loaded from another folder), and
// LoadWeightsRank's (gpuarena.ErrOutOfMemory, checkpoint errors).
func (g *gateway) load(ctx context.Context, m *nodepb.LoadRequest) (*nodepb.Deployment, error) {
	key, dir := m.GetKey(), m.GetModelDir()
	d, ok := g.deployments[key]
	switch {
	case !ok:
		return nil, fmt.Errorf("load %q: %w: build it first", key, ErrNotFound)
	case dir == "":
		return nil, fmt.Errorf("load %q: %w: no model_dir", key, gpuarena.ErrInvalidValue)
	case d.dep.GetLoaded() && d.dep.GetModelDir() == dir:
		return proto.CloneOf(d.dep), nil
	case d.dep.GetLoaded():
		return nil, fmt.Errorf("load %q: %w: it holds the weights of %s; release it to load %s", key, ErrKeyConflict, d.dep.GetModelDir(), dir)
	}
	cfg, err := arena.LoadConfig(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("load %q: model_dir %q: %w: no such folder on the node: %w", key, dir, gpuarena.ErrInvalidValue, err)
	case err != nil:
		return nil, fmt.Errorf("load %q: model_dir %q: %w: %w", key, dir, gpuarena.ErrInvalidValue, err)
	case !reflect.DeepEqual(cfg, d.cfg):
		return nil, fmt.Errorf("load %q: model_dir %q: %w: its config.json (%s) is not the deployment's model (%s)", key, dir,
			gpuarena.ErrInvalidValue, cfg.ModelType, d.cfg.ModelType)
	}
	for i, dd := range d.dep.GetDevices() {
		mgr := g.group.Rank(int(dd.GetDevice()))
		w, err := mgr.LoadWeightsRank(ctx, dir, d.layout, dd.GetRank(), d.wopts)
		if err != nil {
			err = fmt.Errorf("load %q: rank %d on device %d: %w", key, dd.GetRank(), dd.GetDevice(), err)
			return nil, errors.Join(err, g.freeWeights(d.dep.GetDevices()[:i]))
		}
		dd.WeightsBytes = w.AllocatedBytes
	}
	d.dep.Loaded, d.dep.ModelDir = true, dir
	g.version++
	g.logger.Info("gpuarena node: deployment loaded", "key", key, "model_dir", dir)
	return proto.CloneOf(d.dep), nil
}

// freeWeights frees the weights of devs (a load rolled back), whatever the
// load's context says.
func (g *gateway) freeWeights(devs []*nodepb.DeploymentDevice) error {
	var errs []error
	for _, dd := range devs {
		if _, err := g.group.Rank(int(dd.GetDevice())).FreeOwner(context.Background(), device.WeightsOwner); err != nil {
			errs = append(errs, fmt.Errorf("freeing the weights of device %d: %w", dd.GetDevice(), err))
		}
		dd.WeightsBytes = 0
	}
	return errors.Join(errs...)
}

// releaseDevices releases devs (Manager.Release: the arena and whatever
// else they hold) for the deployment key, and resets each that held an
// arena (Manager.Reset), so a later deployment builds there again. A device
// whose release or reset fails stays refused (retired, naming key) until
// a later release of the same deployment succeeds. It keeps going after
// an error and returns them all.
func (g *gateway) releaseDevices(ctx context.Context, key string, devs []int32) error {
	var errs []error
	for _, dev := range devs {
		m := g.group.Rank(int(dev))
		_, err := m.Release(ctx)
		if err == nil {
			err = m.Reset(ctx)
		}
		switch {
		case err == nil, errors.Is(err, gpuarena.ErrNoArena):
			delete(g.retired, dev)
		case errors.Is(err, gpuarena.ErrClosed):
			g.retired[dev] = key
		default:
			g.retired[dev] = key
			errs = append(errs, fmt.Errorf("releasing device %d: %w", dev, err))
		}
	}
	return errors.Join(errs...)
}

// releaseDeployment releases key's deployment, or the devices a failed
// build of key left retired (releaseRetired); false when the node holds
// neither. A release that fails keeps the deployment, so the next release
// or tick tries again (Manager.Release is idempotent).
func (g *gateway) releaseDeployment(ctx context.Context, key string) (bool, error) {
	d, ok := g.deployments[key]
	if !ok {
		return g.releaseRetired(ctx, key)
	}
	var devs []int32
	for _, dd := range d.dep.GetDevices() {
		devs = append(devs, dd.GetDevice())
	}
	if err := g.releaseDevices(ctx, key, devs); err != nil {
		return false, fmt.Errorf("release %q: %w", key, err)
	}
	delete(g.deployments, key)
	g.version++
	g.logger.Info("gpuarena node: deployment released", "key", key, "devices", devs)
	return true, nil
}

// releaseRetired releases again the devices retired under key with no
// deployment of key: a build whose rollback could not release them (the
// deployment was never made, so no lease expires for them; each lease
// tick tries them again: retryFailedBuilds). False when there are none;
// an error when one still fails, which keeps it retired.
func (g *gateway) releaseRetired(ctx context.Context, key string) (bool, error) {
	var devs []int32
	for dev, k := range g.retired {
		if k == key {
			devs = append(devs, dev)
		}
	}
	if len(devs) == 0 {
		return false, nil
	}
	slices.Sort(devs)
	if err := g.releaseDevices(ctx, key, devs); err != nil {
		return false, fmt.Errorf("release %q (the devices its failed build left): %w", key, err)
	}
	g.version++
	g.logger.Info("gpuarena node: devices of a failed build released", "key", key, "devices", devs)
	return true, nil
}

// expireDeployments releases every deployment whose lease has lapsed, in
// key order; true when one was.
func (g *gateway) expireDeployments(ctx context.Context) bool {
	now := g.now()
	var lapsed []string
	for k, d := range g.deployments {
		if !now.Before(d.expires) {
			lapsed = append(lapsed, k)
		}
	}
	sort.Strings(lapsed)
	for _, k := range lapsed {
		if _, err := g.releaseDeployment(ctx, k); err != nil {
			g.logger.Error("gpuarena node: releasing a lapsed deployment", "key", k, "err", err)
			continue
		}
		g.logger.Info("gpuarena node: deployment lease lapsed", "key", k)
	}
	return len(lapsed) > 0
}

// retryFailedBuilds releases again, in key order, the devices that failed
// builds' rollbacks left retired (releaseRetired); true when one was
// freed. A device retired by a deployment's failed release waits for
// that deployment's next release or lapse instead.
func (g *gateway) retryFailedBuilds(ctx context.Context) bool {
	var keys []string
	for _, k := range g.retired {
		if _, ok := g.deployments[k]; !ok && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	freed := false
	for _, k := range keys {
		ok, err := g.releaseRetired(ctx, k)
		if err != nil {
			g.logger.Warn("gpuarena node: the devices a failed build left are still refused", "key", k, "err", err)
		}
		freed = freed || ok
	}
	return freed
}

// renewAny answers a RenewRequest: a deployment's key extends the
// deployment's lease, any other key the reservation's (renew).
func (g *gateway) renewAny(m *nodepb.RenewRequest) *nodepb.ReserveResponse {
	d, ok := g.deployments[m.GetKey()]
	if !ok {
		res, err := g.renew(m)
		return &nodepb.ReserveResponse{Reservation: res, Error: wireError(err)}
	}
	if err := checkTTL("renew", m.GetKey(), m.GetTtlMs()); err != nil {
		return &nodepb.ReserveResponse{Error: wireError(err)}
	}
	return &nodepb.ReserveResponse{Deployment: g.extendDeployment(d, m.GetTtlMs())}
}

// describeDeployment fills d's deployment fields from the deployment that
// holds its device, if one does.
func (g *gateway) describeDeployment(d *nodepb.DeviceInventory) {
	if dep := g.deploymentOn(d.GetIndex()); dep != nil {
		d.DeploymentKey, d.ModelType = dep.dep.GetKey(), dep.dep.GetModelType()
		d.WeightsLoaded, d.ModelDir = dep.dep.GetLoaded(), dep.dep.GetModelDir()
	}
}
