package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena/internal/modelgen"
	"github.com/gpuarena/gpuarena/internal/node"
	"github.com/gpuarena/gpuarena/internal/nodepb"
	"github.com/gpuarena/gpuarena/internal/testkit"
)

// TestClusterBuildRequestCarriesTheFlags: "cluster build"'s flags, the
// serving and budget options as "place" takes them, reach the
// BuildRequest's model (node.PlaceRequestFor), the CUDA-graph rule
// included.
func TestClusterBuildRequestCarriesTheFlags(t *testing.T) {
	c := &clusterCmd{app: &app{logger: testkit.Discard}, key: "k", ttl: time.Minute}
	build := newClusterBuildCmd(c)
	if err := build.ParseFlags([]string{"--config", configPath("llama-3.1-8b"), "--tensor-parallel-size", "2", "--devices", "0,1",
		"--max-seq-len", "4096", "--kv-cache-dtype", "fp8", "--cuda-graphs", "estimated", "--gpu-memory-utilization", "0.8"}); err != nil {
		t.Fatal(err)
	}
	req, err := c.buildRequest(build.Flags())
	if err != nil {
		t.Fatal(err)
	}
	m := req.GetModel()
	if req.GetKey() != "k" || req.GetTtlMs() != 60_000 || len(req.GetDevices()) != 2 || m.GetTensorParallelSize() != 2 ||
		m.GetMaxSeqLen() != 4096 || m.GetKvCacheDtype() != "fp8" || m.GetCudaGraphs() != "estimated" || m.GetGpuMemoryUtilization() != 0.8 {
		t.Fatalf("build's request %v: want key k for 60 s on 2 devices, TP2, max_seq_len 4096, kv_cache_dtype fp8, cuda_graphs estimated, utilization 0.8", req)
	}
}

// TestClusterDeployCommandsOnANode runs cluster build, load, meminfo,
// renew and release against a node in the test process: a tiny Llama
// with TP2 on its two devices, built from the flags as "cluster build"
// parses them.
func TestClusterDeployCommandsOnANode(t *testing.T) {
	n, client := startLocalNode(t)
	addr := n.Self().Address
	ctx := context.Background()
	gen := modelgen.ForTest(t, filepath.Join("..", "..", "internal", "modelgen", "testdata", "tiny-llama.json"), modelgen.Options{Seed: 1})
	c := &clusterCmd{app: &app{logger: testkit.Discard}, conn: clusterFlags{cluster: addr}, node: addr, key: "llama", ttl: time.Minute}
	build := newClusterBuildCmd(c)
	if err := build.ParseFlags([]string{"--config", gen.Dir, "--tensor-parallel-size", "2", "--devices", "0,1",
		"--max-batch-tokens", "256", "--max-seq-len", "512"}); err != nil {
		t.Fatal(err)
	}
	req, err := c.buildRequest(build.Flags())
	if err != nil {
		t.Fatal(err)
	}
	if req.GetModel().GetTensorParallelSize() != 2 || req.GetModel().GetMaxSeqLen() != 512 || len(req.GetDevices()) != 2 {
		t.Fatalf("build's request %v: want TP2, max_seq_len 512, devices 0 and 1", req)
	}
	var out bytes.Buffer
	if err := c.build(ctx, client, &out, req); err != nil {
		t.Fatal(err)
	}
	if want := `built "llama" on ` + addr + ": llama, stage 0 of "; !strings.HasPrefix(out.String(), want) {
		t.Fatalf("build printed %q, want it to start with %q", out.String(), want)
	}
	c.deploy.modelDir = gen.Dir
	c.jsonOut = true
	out.Reset()
	if err := c.load(ctx, client, &out); err != nil {
		t.Fatal(err)
	}
	var dep nodepb.Deployment
	if err := json.Unmarshal(out.Bytes(), &dep); err != nil {
		t.Fatal(err)
	}
	if !dep.GetLoaded() || len(dep.GetDevices()) != 2 || dep.GetDevices()[1].GetWeightsBytes() <= 0 {
		t.Fatalf("load --json printed %s: want a loaded deployment with weights on both devices", out.String())
	}
	c.deploy.memDev = -1
	out.Reset()
	if err := c.meminfo(ctx, client, &out); err != nil {
		t.Fatal(err)
	}
	var mem []*nodepb.DeviceMemInfo
	if err := json.Unmarshal(out.Bytes(), &mem); err != nil {
		t.Fatal(err)
	}
	for i, d := range mem {
		if want := dep.GetDevices()[i].GetArenaBytes() + dep.GetDevices()[i].GetWeightsBytes(); d.GetLedgerBytes() != want {
			t.Fatalf("meminfo device %d: ledger %d B, want the deployment's arena and weights, %d B", i, d.GetLedgerBytes(), want)
		}
	}
	out.Reset()
	if err := c.renew(ctx, client, &out); err != nil || !strings.Contains(out.String(), `"key"`) {
		t.Fatalf("renew of the deployment: %v, printed %s", err, out.String())
	}
	c.deploy.modelDir = filepath.Join(t.TempDir(), "absent")
	c.key = "none"
	if err := c.load(ctx, client, &out); !errors.Is(err, node.ErrNotFound) {
		t.Fatalf("load of an unknown key: %v, want ErrNotFound", err)
	}
	c.key = "llama"
	if err := c.load(ctx, client, &out); !errors.Is(err, node.ErrKeyConflict) {
		t.Fatalf("load of a loaded deployment from another folder: %v, want ErrKeyConflict", err)
	}
	c.jsonOut = false
	out.Reset()
	if err := c.release(ctx, client, &out); err != nil || out.String() != `released "llama" on `+addr+"\n" {
		t.Fatalf("release: %v, printed %q", err, out.String())
	}
	// The release reset the devices: the same build deploys there again.
	out.Reset()
	if err := c.build(ctx, client, &out, req); err != nil || !strings.Contains(out.String(), "llama") {
		t.Fatalf("build on released devices: %v, printed %q; want a new deployment", err, out.String())
	}
	if err := c.release(ctx, client, &out); err != nil {
		t.Fatalf("release of the second deployment: %v", err)
	}
}
