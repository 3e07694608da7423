package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/modelgen"
	"github.com/gpuarena/gpuarena/internal/nodepb"
	"github.com/gpuarena/gpuarena/internal/testkit"
	"github.com/gpuarena/gpuarena/internal/testkit/simgroup"
)

// tinyTP2 is a generated tiny Llama folder and the BuildRequest that
// deploys it with tensor_parallel_size 2 on devices 0 and 1 under key,
// with small serving options.
func tinyTP2(t *testing.T, key string) (*modelgen.Result, *nodepb.BuildRequest) {
	t.Helper()
	gen := modelgen.ForTest(t, filepath.Join("..", "modelgen", "testdata", "tiny-llama.json"), modelgen.Options{Seed: 1})
	cfgJSON, err := os.ReadFile(gen.Config)
	if err != nil {
		t.Fatal(err)
	}
	return gen, &nodepb.BuildRequest{Key: key, TtlMs: 60_000, Devices: []int32{0, 1},
		Model: &nodepb.PlaceRequest{ConfigJson: cfgJSON, TensorParallelSize: 2, MaxBatchTokens: 256, MaxSeqLen: 512}}
}

// wantRankBytes is, for each global rank of req's layout, the arena's bytes
// (arena.PlanRanks, pooled by arena.NewPoolLayout, and its slabs) and the weight shard's pooled bytes (arena.RankShards,
// arena.PooledBytes): what the node must hold for it.
func wantRankBytes(t *testing.T, req *nodepb.BuildRequest) (arenaBytes, weightBytes []int64) {
	t.Helper()
	cfg, err := arena.ParseConfig(req.GetModel().GetConfigJson())
	if err != nil {
		t.Fatal(err)
	}
	opts := arena.Options{MaxBatchTokens: req.GetModel().GetMaxBatchTokens(), MaxSeqLen: req.GetModel().GetMaxSeqLen()}
	layout := arena.ParallelLayout{TensorParallelSize: req.GetModel().GetTensorParallelSize()}
	ranks, err := arena.PlanRanks(cfg, opts, arena.WeightOptions{}, layout)
	if err != nil {
		t.Fatal(err)
	}
	for r := range ranks {
		shards, err := arena.RankShards(cfg, arena.WeightOptions{}, layout, int64(r))
		if err != nil {
			t.Fatal(err)
		}
		sizes := make([]int64, len(shards))
		for i, s := range shards {
			sizes[i] = s.RankBytes()
		}
		pooled, err := arena.PooledBytes(sizes)
		if err != nil {
			t.Fatal(err)
		}
		pool, err := arena.NewPoolLayout(ranks[r].Plan)
		if err != nil {
			t.Fatal(err)
		}
		arenaBytes, weightBytes = append(arenaBytes, pool.Bytes+ranks[r].Plan.SlabBytes), append(weightBytes, pooled)
	}
	return arenaBytes, weightBytes
}

// ownerTotals is what each owner holds on device dev, per the ledger.
func ownerTotals(t *testing.T, lg *localGateway, dev int32) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, e := range askLocal[*nodepb.LedgerResponse](t, lg, &nodepb.LedgerRequest{Device: dev}).GetEntries() {
		out[e.GetOwner()] += e.GetBytes()
	}
	return out
}

// freeBytes is device dev's free memory per MemInfo.
func freeBytes(t *testing.T, lg *localGateway, dev int32) int64 {
	t.Helper()
	r := askLocal[*nodepb.MemInfoResponse](t, lg, &nodepb.MemInfoRequest{Device: dev})
	if r.GetError() != nil || len(r.GetDevices()) != 1 {
		t.Fatalf("meminfo of device %d: %v", dev, r)
	}
	return r.GetDevices()[0].GetFreeBytes()
}

// deployed asks the gateway for msg (a BuildRequest or LoadRequest) and
// returns the deployment, failing the test on a refusal.
func deployed(t *testing.T, lg *localGateway, msg proto.Message) *nodepb.Deployment {
	t.Helper()
	r := askLocal[*nodepb.DeploymentResponse](t, lg, msg)
	if r.GetError() != nil {
		t.Fatalf("%T: %v", msg, r.GetError())
	}
	return r.GetDeployment()
}

func TestMemInfo(t *testing.T) {
	lg := newLocalGateway(t)
	all := askLocal[*nodepb.MemInfoResponse](t, lg, &nodepb.MemInfoRequest{Device: -1})
	if all.GetError() != nil || len(all.GetDevices()) != 2 {
		t.Fatalf("meminfo of every device: %v, want 2 devices", all)
	}
	for i, d := range all.GetDevices() {
		free, total, err := lg.group.Rank(i).MemInfo(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if d.GetDevice() != int32(i) || d.GetFreeBytes() != free || d.GetTotalBytes() != total ||
			d.GetBudgetBytes() != lg.group.Rank(i).Budget() || d.GetLedgerBytes() != 0 {
			t.Fatalf("device %d: %v, want free %d, total %d, budget %d, ledger 0", i, d, free, total, lg.group.Rank(i).Budget())
		}
	}
	before := freeBytes(t, lg, 1)
	if r := askLocal[*nodepb.ReserveResponse](t, lg, &nodepb.ReserveRequest{Key: "m", Device: 1, Bytes: 5 * testkit.MiB, TtlMs: 1000}); r.GetError() != nil {
		t.Fatal(r.GetError())
	}
	one := askLocal[*nodepb.MemInfoResponse](t, lg, &nodepb.MemInfoRequest{Device: 1}).GetDevices()[0]
	if one.GetLedgerBytes() != 5*testkit.MiB || one.GetFreeBytes() != before-5*testkit.MiB {
		t.Fatalf("device 1 after reserving 5 MiB: %v, want ledger %d B and free %d B", one, 5*testkit.MiB, before-5*testkit.MiB)
	}
	bad := askLocal[*nodepb.MemInfoResponse](t, lg, &nodepb.MemInfoRequest{Device: 2})
	if !errors.Is(remoteError("local", bad.GetError()), ErrUnknownDevice) {
		t.Fatalf("meminfo of device 2: %v, want ErrUnknownDevice", bad.GetError())
	}
}

func TestDeployBuildLoadRelease(t *testing.T) {
	lg := newLocalGateway(t)
	gen, req := tinyTP2(t, "llama")
	arenaBytes, weightBytes := wantRankBytes(t, req)
	free := []int64{freeBytes(t, lg, 0), freeBytes(t, lg, 1)}

	dep := deployed(t, lg, req)
	for r, dev := range []int32{0, 1} {
		got := ownerTotals(t, lg, dev)
		if got[device.ArenaOwner] != arenaBytes[r] || len(got) != 1 {
			t.Fatalf("device %d after the build holds %v, want only %s = %d B (rank %d's plan)", dev, got, device.ArenaOwner, arenaBytes[r], r)
		}
		if d := dep.GetDevices()[r]; d.GetDevice() != dev || d.GetRank() != int64(r) || d.GetArenaBytes() != arenaBytes[r] {
			t.Fatalf("deployment device %d: %v, want rank %d with %d arena bytes", r, d, r, arenaBytes[r])
		}
	}
	lg.clock.Advance(time.Second)
	again := deployed(t, lg, req)
	if again.GetExpiresUnixMs()-dep.GetExpiresUnixMs() != 1000 {
		t.Fatalf("a repeated build moved the lease by %d ms, want 1000 (renewed from now)", again.GetExpiresUnixMs()-dep.GetExpiresUnixMs())
	}
	if got := ownerTotals(t, lg, 0)[device.ArenaOwner]; got != arenaBytes[0] {
		t.Fatalf("device 0 holds %d B of arena after a repeated build, want %d", got, arenaBytes[0])
	}

	load := &nodepb.LoadRequest{Key: "llama", ModelDir: gen.Dir}
	loaded := deployed(t, lg, load)
	for r, dev := range []int32{0, 1} {
		got := ownerTotals(t, lg, dev)
		if got[device.WeightsOwner] != weightBytes[r] || got[device.ArenaOwner] != arenaBytes[r] {
			t.Fatalf("device %d after the load holds %v, want %s = %d B (rank %d's pooled shard) beside the arena", dev, got,
				device.WeightsOwner, weightBytes[r], r)
		}
		if loaded.GetDevices()[r].GetWeightsBytes() != weightBytes[r] {
			t.Fatalf("deployment says rank %d holds %d B of weights, want %d", r, loaded.GetDevices()[r].GetWeightsBytes(), weightBytes[r])
		}
	}
	if !proto.Equal(deployed(t, lg, load), loaded) {
		t.Fatal("a repeated load answered another deployment")
	}
	if got := ownerTotals(t, lg, 1)[device.WeightsOwner]; got != weightBytes[1] {
		t.Fatalf("device 1 holds %d B of weights after a repeated load, want %d", got, weightBytes[1])
	}
	inv := askLocal[*nodepb.InventoryResponse](t, lg, &nodepb.InventoryRequest{}).GetInventory()
	for _, d := range inv.GetDevices() {
		if d.GetDeploymentKey() != "llama" || d.GetModelType() != "llama" || !d.GetWeightsLoaded() || d.GetModelDir() != gen.Dir {
			t.Fatalf("inventory device %d: %v, want deployment llama loaded from %s", d.GetIndex(), d, gen.Dir)
		}
	}

	busy := askLocal[*nodepb.ReserveResponse](t, lg, &nodepb.ReserveRequest{Key: "r", Device: 0, Bytes: 1, TtlMs: 1000})
	if !errors.Is(remoteError("local", busy.GetError()), ErrDeviceInUse) {
		t.Fatalf("reserve on a deployment's device: %v, want ErrDeviceInUse", busy.GetError())
	}
	other := proto.CloneOf(req)
	other.Key = "other"
	if r := askLocal[*nodepb.DeploymentResponse](t, lg, other); !errors.Is(remoteError("local", r.GetError()), ErrDeviceInUse) {
		t.Fatalf("build on a deployment's devices: %v, want ErrDeviceInUse", r.GetError())
	}
	if rel := askLocal[*nodepb.ReleaseResponse](t, lg, &nodepb.ReleaseRequest{Key: "llama"}); !rel.GetReleased() || rel.GetError() != nil {
		t.Fatalf("release: %v", rel)
	}
	for _, dev := range []int32{0, 1} {
		if got := ownerTotals(t, lg, dev); len(got) != 0 {
			t.Fatalf("device %d holds %v after the release, want nothing", dev, got)
		}
		if got := freeBytes(t, lg, dev); got != free[dev] {
			t.Fatalf("device %d has %d B free after the release, want %d as before the build", dev, got, free[dev])
		}
	}
	// The released devices are reset (Manager.Reset): a new deployment
	// builds there, and releases again to nothing.
	second := proto.CloneOf(req)
	second.Key = "again"
	deployed(t, lg, second)
	if rel := askLocal[*nodepb.ReleaseResponse](t, lg, &nodepb.ReleaseRequest{Key: "again"}); !rel.GetReleased() || rel.GetError() != nil {
		t.Fatalf("release of the second deployment: %v", rel)
	}
	for _, dev := range []int32{0, 1} {
		if got := ownerTotals(t, lg, dev); len(got) != 0 {
			t.Fatalf("device %d holds %v after the second release, want nothing", dev, got)
		}
	}
}

func TestDeployLeaseLapses(t *testing.T) {
	lg := newLocalGateway(t)
	_, req := tinyTP2(t, "lapse")
	req.TtlMs = 1000
	deployed(t, lg, req)
	lg.clock.Advance(600 * time.Millisecond)
	renewed := askLocal[*nodepb.ReserveResponse](t, lg, &nodepb.RenewRequest{Key: "lapse", TtlMs: 1000})
	if renewed.GetError() != nil || renewed.GetDeployment().GetKey() != "lapse" || renewed.GetReservation() != nil {
		t.Fatalf("renew of a deployment: %v, want the deployment", renewed)
	}
	lg.clock.Advance(999 * time.Millisecond)
	lg.system.Root.Send(lg.pid, leaseTick{})
	if got := ownerTotals(t, lg, 0)[device.ArenaOwner]; got == 0 {
		t.Fatal("a renewed deployment was released 1 ms before its lease ended")
	}
	lg.clock.Advance(time.Millisecond)
	lg.system.Root.Send(lg.pid, leaseTick{})
	for _, dev := range []int32{0, 1} {
		if got := ownerTotals(t, lg, dev); len(got) != 0 {
			t.Fatalf("device %d holds %v after the lease lapsed, want nothing", dev, got)
		}
	}
	renew := askLocal[*nodepb.ReserveResponse](t, lg, &nodepb.RenewRequest{Key: "lapse", TtlMs: 1000})
	if !errors.Is(remoteError("local", renew.GetError()), ErrNotFound) {
		t.Fatalf("renew of a lapsed deployment: %v, want ErrNotFound", renew.GetError())
	}
}

func TestDeployRefusals(t *testing.T) {
	lg := newLocalGateway(t)
	_, req := tinyTP2(t, "d")
	with := func(f func(r *nodepb.BuildRequest)) *nodepb.BuildRequest {
		r := proto.CloneOf(req)
		f(r)
		return r
	}
	if r := askLocal[*nodepb.ReserveResponse](t, lg, &nodepb.ReserveRequest{Key: "held", Device: 1, Bytes: testkit.MiB, TtlMs: 60_000}); r.GetError() != nil {
		t.Fatal(r.GetError())
	}
	for _, tc := range []struct {
		name string
		req  *nodepb.BuildRequest
		want error
	}{
		{"no key", with(func(r *nodepb.BuildRequest) { r.Key = "" }), gpuarena.ErrInvalidValue},
		{"no model", with(func(r *nodepb.BuildRequest) { r.Model = nil }), gpuarena.ErrInvalidValue},
		{"bad config_json", with(func(r *nodepb.BuildRequest) { r.Model.ConfigJson = []byte("{") }), gpuarena.ErrInvalidValue},
		{"ttl too short", with(func(r *nodepb.BuildRequest) { r.TtlMs = 1 }), gpuarena.ErrInvalidValue},
		{"one device for TP2", with(func(r *nodepb.BuildRequest) { r.Devices = []int32{0} }), gpuarena.ErrInvalidValue},
		{"a device twice", with(func(r *nodepb.BuildRequest) { r.Devices = []int32{0, 0} }), gpuarena.ErrInvalidValue},
		{"stage past the pipeline", with(func(r *nodepb.BuildRequest) { r.Stage = 1 }), gpuarena.ErrInvalidValue},
		{"TP the model does not split", with(func(r *nodepb.BuildRequest) {
			r.Model.TensorParallelSize = 3
			r.Devices = []int32{0, 1, 2}
		}), gpuarena.ErrInvalidValue},
		{"no such device", with(func(r *nodepb.BuildRequest) { r.Devices = []int32{0, 2} }), ErrUnknownDevice},
		{"a reserved device", req, ErrDeviceInUse},
		{"a reservation's key", with(func(r *nodepb.BuildRequest) { r.Key = "held" }), ErrKeyConflict},
		{"past the budget", with(func(r *nodepb.BuildRequest) {
			r.Model.MaxBatchTokens, r.Model.MaxSeqLen = 1<<24, 1<<24
			r.Model.AllowLongMaxSeqLen = true
			r.Devices = []int32{0, 1}
		}), gpuarena.ErrOutOfMemory},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := askLocal[*nodepb.DeploymentResponse](t, lg, tc.req)
			if err := remoteError("local", r.GetError()); !errors.Is(err, tc.want) {
				t.Fatalf("build: %v, want %v", err, tc.want)
			}
			if r.GetDeployment() != nil {
				t.Fatalf("a refused build returned %v", r.GetDeployment())
			}
		})
	}
	if got := ownerTotals(t, lg, 0); len(got) != 0 {
		t.Fatalf("device 0 holds %v after the refused builds, want nothing", got)
	}
	if r := askLocal[*nodepb.ReleaseResponse](t, lg, &nodepb.ReleaseRequest{Key: "held"}); !r.GetReleased() {
		t.Fatalf("release of the reservation: %v", r)
	}
	if r := askLocal[*nodepb.DeploymentResponse](t, lg, &nodepb.LoadRequest{Key: "d", ModelDir: t.TempDir()}); !errors.Is(remoteError("local", r.GetError()), ErrNotFound) {
		t.Fatalf("load before the build: %v, want ErrNotFound", r.GetError())
	}
	deployed(t, lg, req)
	conflict := with(func(r *nodepb.BuildRequest) { r.Model.MaxSeqLen = 1024 })
	if r := askLocal[*nodepb.DeploymentResponse](t, lg, conflict); !errors.Is(remoteError("local", r.GetError()), ErrKeyConflict) {
		t.Fatalf("build of a used key with other options: %v, want ErrKeyConflict", r.GetError())
	}
	other := modelgen.ForTest(t, filepath.Join("..", "modelgen", "testdata", "tiny-qwen3-moe.json"), modelgen.Options{Layers: 1})
	for _, tc := range []struct{ name, dir string }{
		{"a folder that does not exist", filepath.Join(t.TempDir(), "absent")},
		{"another model", other.Dir},
		{"no folder", ""},
	} {
		r := askLocal[*nodepb.DeploymentResponse](t, lg, &nodepb.LoadRequest{Key: "d", ModelDir: tc.dir})
		if err := remoteError("local", r.GetError()); !errors.Is(err, gpuarena.ErrInvalidValue) {
			t.Fatalf("load from %s: %v, want ErrInvalidValue", tc.name, err)
		}
		for _, dev := range []int32{0, 1} {
			if got := ownerTotals(t, lg, dev)[device.WeightsOwner]; got != 0 {
				t.Fatalf("load from %s left %d B of weights on device %d", tc.name, got, dev)
			}
		}
	}
}

// TestDeployOnARemoteNode deploys a tiny Llama with TP2 on a node process
// over gRPC: build and load (each repeated without effect), refusals
// typed on the client's side with nothing left allocated, a release that
// frees both devices, and a second deployment freed by its lapsed lease.
func TestDeployOnARemoteNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node process")
	}
	port := freePorts(t, 1)[0]
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	n, err := startChild(t, childSpec{GRPCPort: port, Seeds: []string{addr}, Machine: "4xh100-80gb", Refresh: testRefresh, Static: true})
	if err != nil {
		t.Fatal(err)
	}
	client, shutdown := startTestClient(t)
	defer shutdown()
	ctx := context.Background()
	gen, req := tinyTP2(t, "remote")
	arenaBytes, weightBytes := wantRankBytes(t, req)
	before, err := client.MemInfo(ctx, n.address, -1)
	if err != nil || len(before) != 4 {
		t.Fatalf("meminfo: %v, %v; want 4 devices", before, err)
	}
	held := func(dev int32) int64 {
		t.Helper()
		led, err := client.Ledger(ctx, n.address, dev)
		if err != nil {
			t.Fatal(err)
		}
		return led.GetCurrentBytes()
	}
	if _, err := client.Build(ctx, n.address, proto.CloneOf(req)); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Build(ctx, n.address, proto.CloneOf(req)); err != nil {
		t.Fatalf("repeated build: %v", err)
	}
	for r := range int32(2) {
		if got := held(r); got != arenaBytes[r] {
			t.Fatalf("device %d holds %d B after two builds of one key, want rank %d's arena, %d B", r, got, r, arenaBytes[r])
		}
	}
	bad := proto.CloneOf(req)
	bad.Key, bad.Devices, bad.Model.ConfigJson = "bad", []int32{2, 3}, []byte(`{"model_type": 7}`)
	var re *RemoteError
	if _, err := client.Build(ctx, n.address, bad); !errors.Is(err, gpuarena.ErrInvalidValue) || !errors.As(err, &re) {
		t.Fatalf("build of a bad config_json: %v, want a *RemoteError matching ErrInvalidValue", err)
	}
	if _, err := client.Load(ctx, n.address, "remote", filepath.Join(t.TempDir(), "absent")); !errors.Is(err, gpuarena.ErrInvalidValue) {
		t.Fatalf("load from a folder that does not exist: %v, want ErrInvalidValue", err)
	}
	for r := range int32(4) {
		want := int64(0)
		if r < 2 {
			want = arenaBytes[r]
		}
		if got := held(r); got != want {
			t.Fatalf("device %d holds %d B after the refusals, want %d", r, got, want)
		}
	}
	for range 2 {
		dep, err := client.Load(ctx, n.address, "remote", gen.Dir)
		if err != nil || !dep.GetLoaded() {
			t.Fatalf("load: %v, %v", dep, err)
		}
	}
	for r := range int32(2) {
		if got := held(r); got != arenaBytes[r]+weightBytes[r] {
			t.Fatalf("device %d holds %d B after two loads, want arena %d + shard %d", r, got, arenaBytes[r], weightBytes[r])
		}
	}
	if ok, err := client.Release(ctx, n.address, "remote"); !ok || err != nil {
		t.Fatalf("release: %v, %v", ok, err)
	}
	after, err := client.MemInfo(ctx, n.address, -1)
	if err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		if after[r].GetLedgerBytes() != 0 || after[r].GetFreeBytes() != before[r].GetFreeBytes() {
			t.Fatalf("device %d after the release: %v, want ledger 0 and %d B free as before", r, after[r], before[r].GetFreeBytes())
		}
	}
	lapsing := proto.CloneOf(req)
	lapsing.Key, lapsing.Devices, lapsing.TtlMs = "lapsing", []int32{2, 3}, 300
	if _, err := client.Build(ctx, n.address, lapsing); err != nil {
		t.Fatal(err)
	}
	if got := held(3); got != arenaBytes[1] {
		t.Fatalf("device 3 holds %d B, want rank 1's arena, %d B", got, arenaBytes[1])
	}
	testkit.Eventually(t, 10*time.Second, "the lapsed deployment released", func() error {
		for r := int32(2); r < 4; r++ {
			if got := held(r); got != 0 {
				return fmt.Errorf("device %d holds %d B", r, got)
			}
		}
		return nil
	})
	if _, _, err := client.RenewLease(ctx, n.address, "lapsing", time.Second); !errors.Is(err, ErrNotFound) {
		t.Fatalf("renew of a lapsed deployment: %v, want ErrNotFound", err)
	}
}

// A build that fails on rank 1 and whose rollback cannot free rank 0's
// arena leaves device 0 refused, naming the build's key, and a release of
// that key frees it: the devices are not held until the node restarts.
func TestFailedRollbackIsReleasedByItsKey(t *testing.T) {
	mc := simgroup.Machine(t, "2xh100-80gb")
	mc.Faults = []gpuworker.Faults{{FailFreeAt: 1}, {FailAllocAt: 1}}
	lg := newLocalGatewayOn(t, mc, nil)
	_, req := tinyTP2(t, "d")
	r := askLocal[*nodepb.DeploymentResponse](t, lg, req)
	err := remoteError("local", r.GetError())
	if !errors.Is(err, gpuarena.ErrOutOfMemory) || !strings.Contains(err.Error(), `stay refused until a release of "d"`) {
		t.Fatalf("build: %v, want rank 1's ErrOutOfMemory and the failed rollback, with what to do", err)
	}
	if got := ownerTotals(t, lg, 0)[device.ArenaOwner]; got == 0 {
		t.Fatal("device 0 holds no arena after its release failed: the fault did not take")
	}
	other := proto.CloneOf(req)
	other.Key = "e"
	r = askLocal[*nodepb.DeploymentResponse](t, lg, other)
	if err := remoteError("local", r.GetError()); !errors.Is(err, ErrDeviceInUse) || !strings.Contains(err.Error(), `"d"`) {
		t.Fatalf("build on the device the rollback left: %v, want ErrDeviceInUse naming \"d\"", err)
	}
	if rel := askLocal[*nodepb.ReleaseResponse](t, lg, &nodepb.ReleaseRequest{Key: "d"}); !rel.GetReleased() || rel.GetError() != nil {
		t.Fatalf("release of the failed build's key: %v, want released", rel)
	}
	checkEmpty := func(when string) {
		t.Helper()
		for _, dev := range []int32{0, 1} {
			if got := ownerTotals(t, lg, dev); len(got) != 0 {
				t.Fatalf("device %d holds %v %s, want nothing", dev, got, when)
			}
		}
	}
	checkEmpty("after the release")
	if rel := askLocal[*nodepb.ReleaseResponse](t, lg, &nodepb.ReleaseRequest{Key: "d"}); rel.GetReleased() {
		t.Fatalf("a second release of the key: %v, want nothing to release", rel)
	}
	dep := deployed(t, lg, other)
	if len(dep.GetDevices()) != 2 {
		t.Fatalf("the build after the release: %v, want both devices", dep)
	}
}

// A failed build's devices whose rollback failed are also freed by the
// next lease tick, for a caller that never releases the key.
func TestFailedRollbackIsRetriedByTheLeaseTick(t *testing.T) {
	mc := simgroup.Machine(t, "2xh100-80gb")
	mc.Faults = []gpuworker.Faults{{FailFreeAt: 1}, {FailAllocAt: 1}}
	lg := newLocalGatewayOn(t, mc, nil)
	_, req := tinyTP2(t, "d")
	if r := askLocal[*nodepb.DeploymentResponse](t, lg, req); r.GetError() == nil {
		t.Fatal("the build succeeded; want rank 1's allocation to fail")
	}
	if got := ownerTotals(t, lg, 0)[device.ArenaOwner]; got == 0 {
		t.Fatal("device 0 holds no arena after its release failed: the fault did not take")
	}
	lg.system.Root.Send(lg.pid, leaseTick{})
	if got := ownerTotals(t, lg, 0); len(got) != 0 {
		t.Fatalf("device 0 holds %v after a lease tick, want nothing", got)
	}
	req.Key = "e"
	deployed(t, lg, req)
}
