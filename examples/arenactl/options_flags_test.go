package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// fitJSON runs "arenactl fit --json" with args and decodes the report;
// want is the exit status expected.
func fitJSON(t *testing.T, want int, args ...string) arena.FitReport {
	t.Helper()
	r := cli(t, append([]string{"fit", "--json"}, args...)...)
	if r.code != want {
		t.Fatalf("fit %v: exit %d, want %d; stderr:\n%s", args, r.code, want, r.stderr)
	}
	var f arena.FitReport
	if err := json.Unmarshal([]byte(r.stdout), &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestDeviceSizes: a size needs its unit; GB and GiB are both taken and the
// report gives the bytes; a preset gives the driver's total.
func TestDeviceSizes(t *testing.T) {
	llama := configPath("llama-3.1-8b")
	for _, tt := range []struct {
		args []string
		want int64
	}{
		{[]string{"--device-memory", "80GB"}, 80_000_000_000},
		{[]string{"--device-memory", "80GiB"}, 85_899_345_920},
		{[]string{"--device-memory", "85899345920B"}, 85_899_345_920},
		{[]string{"--device", "h100-80gb"}, 85_045_477_376},
		{[]string{"--device", "A100-80GB"}, 85_100_068_864},
		{nil, gpuworker.H200Bytes},
		{[]string{"--device", "h200"}, 150_109_880_320},
	} {
		if f := fitJSON(t, exitOK, append([]string{"--config", llama}, tt.args...)...); f.Device.TotalBytes != tt.want {
			t.Errorf("%v: device %d B, want %d", tt.args, f.Device.TotalBytes, tt.want)
		}
	}
	if gpuworker.H200Bytes != 150_109_880_320 {
		t.Errorf("hostsim's default %d B, want the H200's 150109880320", gpuworker.H200Bytes)
	}
	text := cli(t, "fit", "--config", llama, "--device", "l4", "--max-seq-len", "2048", "--max-batch-tokens", "2048").stdout
	if !strings.Contains(text, "23570219008 B (21.95 GiB)  (NVIDIA L4)") {
		t.Errorf("text report does not give the bytes and the device:\n%s", text)
	}
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"--device-memory", "80"}, []string{"--device-memory", "give a unit: 80GB", "80GiB"}},
		{[]string{"--device-memory", "1.5"}, []string{"--device-memory", "give a unit"}},
		{[]string{"--device-memory", "1.5B"}, []string{"not a whole number of bytes"}},
		{[]string{"--device", "h300"}, []string{"--device", "h100-80gb, h200"}},
		{[]string{"--device", "0"}, []string{"takes a device name"}},
		{[]string{"--device", "h200", "--device-memory", "80GB"}, []string{"--device h200 and --device-memory: give one"}},
	} {
		r := cli(t, append([]string{"fit", "--config", llama}, tt.args...)...)
		for _, w := range tt.want {
			if r.code != exitFailure || !strings.Contains(r.stderr, w) {
				t.Errorf("%v: exit %d, stderr %q; want %q", tt.args, r.code, r.stderr, w)
			}
		}
	}
	// run and devices: --device is an ordinal or a preset (hostsim).
	d := cli(t, "devices", "--json", "--device", "rtx-4090").mustSucceed(t)
	var got devicesJSON
	if err := json.Unmarshal([]byte(d.stdout), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Devices) != 1 || got.Devices[0].TotalBytes != 25_386_352_640 || got.Devices[0].Name != "hostsim NVIDIA GeForce RTX 4090" {
		t.Errorf("devices --device rtx-4090: %+v", got)
	}
	if r := cli(t, "run", "--config", llama, "--device", "1", "--steps", "1"); r.code != exitFailure || !strings.Contains(r.stderr, "hostsim has one device") {
		t.Errorf("run --device 1: exit %d, %s", r.code, r.stderr)
	}
	if r := cli(t, "run", "--config", llama, "--backend", "cuda", "--device", "h200"); r.code != exitFailure {
		t.Errorf("run --backend cuda --device h200: exit %d", r.code)
	}
}

// TestServingOptionFlags: --logits-rows, --kv-cache-dtype,
// --mamba-ssm-cache-dtype and --allow-long-max-seq-len reach the plan and
// the fit; nonsense values are refused with the accepted range.
func TestServingOptionFlags(t *testing.T) {
	llama := configPath("llama-3.1-8b")
	var p planJSON
	r := cli(t, "plan", "--config", llama, "--json", "--logits-rows", "sampled", "--kv-cache-dtype", "fp8", "--mamba-ssm-cache-dtype", "bf16").mustSucceed(t)
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil {
		t.Fatal(err)
	}
	if o := p.Options; o.LogitsRows != "sampled" || o.KVCacheDType != "fp8" || o.MambaSSMCacheDType != "bfloat16" {
		t.Errorf("options %+v", o)
	}
	for _, b := range p.Buffers {
		if b.Name == "logits" && b.Bytes != 1024*128256*2 {
			t.Errorf("logits %+v, want [1024, 128256]", b)
		}
	}
	// The 24 GiB card of issue 17: all rows do not fit, sampled rows do.
	args := []string{"--config", llama, "--device", "rtx-4090", "--max-batch-tokens", "20000", "--max-seq-len", "8192"}
	if f := fitJSON(t, exitNegative, args...); f.Suggestions == nil || f.Suggestions.LogitsRows != arena.LogitsSampled {
		t.Errorf("all rows: %+v", f.Suggestions)
	}
	if f := fitJSON(t, exitOK, append(args, "--logits-rows", "sampled")...); f.KVTokens != 24112 {
		t.Errorf("sampled rows: %d KV tokens, want 24112", f.KVTokens)
	}
	f8 := fitJSON(t, exitOK, "--config", llama, "--kv-cache-dtype", "fp8_e5m2")
	if f8.KV.KVCacheDType != "fp8_e5m2" || f8.KVBytesPerBlock != 1_048_576 {
		t.Errorf("fp8_e5m2: %s, %d B/block", f8.KV.KVCacheDType, f8.KVBytesPerBlock)
	}
	next := fitJSON(t, exitOK, "--config", configPath("qwen3-next-80b-a3b-thinking"), "--weight-dtype", "fp8", "--mamba-ssm-cache-dtype", "float32")
	if next.KV.SSMStateDType != "float32" || next.KV.SSMStateBytesPerSeq != 36*32*128*128*4 {
		t.Errorf("qwen3-next float32 state: %s, %d B", next.KV.SSMStateDType, next.KV.SSMStateBytesPerSeq)
	}
	inst := fitJSON(t, exitOK, "--config", llama, "--utilization-scope", "instance", "--device-used", "10GB")
	if inst.UtilizationScope != arena.UtilizationInstance || inst.ProcessBudgetBytes != 135_098_892_288 {
		t.Errorf("instance scope: %s, %d B", inst.UtilizationScope, inst.ProcessBudgetBytes)
	}
	if f := fitJSON(t, exitOK, "--config", llama, "--max-seq-len", "262144", "--allow-long-max-seq-len"); f.MaxSeqLen != 262144 {
		t.Errorf("allowed long max_seq_len: %d", f.MaxSeqLen)
	}
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"plan", "--max-seq-len", "262144"}, []string{"--max-seq-len", "limit of 131072 tokens", "--allow-long-max-seq-len"}},
		{[]string{"fit", "--kv-block-size", "100000000"}, []string{"--kv-block-size", "[0, 2048]"}},
		{[]string{"plan", "--lora-max-rank", "100000000"}, []string{"--lora-max-rank", "[0, 512]"}},
		{[]string{"run", "--k-max", "100000"}, []string{"--k-max", "[0, 64]"}},
		{[]string{"plan", "--logits-rows", "some"}, []string{"--logits-rows", `"all" or "sampled"`}},
		{[]string{"fit", "--kv-cache-dtype", "int8"}, []string{"--kv-cache-dtype", "fp8_e5m2"}},
		{[]string{"plan", "--mamba-ssm-cache-dtype", "fp8"}, []string{"--mamba-ssm-cache-dtype"}},
		{[]string{"fit", "--utilization-scope", "cluster"}, []string{"--utilization-scope", "instance"}},
	} {
		r := cli(t, append(tt.args, "--config", llama)...)
		for _, w := range tt.want {
			if r.code != exitFailure || !strings.Contains(r.stderr, w) {
				t.Errorf("%v: exit %d, stderr %q; want %q", tt.args, r.code, r.stderr, w)
			}
		}
	}
}

// TestRunNamesWhatFits: run builds the arena of a model whose weights do
// not fit, and its report says both verdicts instead of one "fits".
func TestRunNamesWhatFits(t *testing.T) {
	r := cli(t, "run", "--config", configPath("qwen3-next-80b-a3b-thinking"), "--json", "--steps", "2", "--clients", "1").mustSucceed(t)
	var keys map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.stdout), &keys); err != nil {
		t.Fatal(err)
	}
	if _, ok := keys["fits"]; ok {
		t.Error(`run --json still has "fits"`)
	}
	var rep runReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	// 159,348,782,592 B of BF16 weights on one H200 (150,109,880,320 B).
	// Short by weights + arena 4,534,081,536 + reserve 1 GiB + one sequence
	// 844,824,576 − budget 135,098,892,288 (README's main demo says so).
	if !rep.ArenaFits || rep.ModelFits || rep.ModelWeightBytes != 159_348_782_592 || rep.ModelWeightSource != "estimate" || rep.ModelShortfallBytes != 30_702_538_240 {
		t.Errorf("arena_fits %v, model_fits %v, weights %d B (%s), short %d B", rep.ArenaFits, rep.ModelFits, rep.ModelWeightBytes, rep.ModelWeightSource, rep.ModelShortfallBytes)
	}
	text := cli(t, "run", "--config", configPath("qwen3-next-80b-a3b-thinking"), "--steps", "1", "--clients", "1").mustSucceed(t).stdout
	if !strings.Contains(text, "model fit                DOES NOT FIT") || !strings.Contains(text, "run builds only the arena") {
		t.Errorf("text report:\n%s", text)
	}
	small := cli(t, "run", "--config", configPath("llama-3.1-8b"), "--json", "--steps", "1", "--clients", "1").mustSucceed(t)
	rep = runReport{}
	if err := json.Unmarshal([]byte(small.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.ArenaFits || !rep.ModelFits || rep.ModelKVBlocks <= 0 {
		t.Errorf("llama: arena_fits %v, model_fits %v, %d blocks", rep.ArenaFits, rep.ModelFits, rep.ModelKVBlocks)
	}
}
