package node

import (
	"errors"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/internal/nodepb"
)

// TestPlaceOptionsRoundTrip sends options through a PlaceRequest, encoded
// and decoded as on the wire, and reads them back equal: every field of
// arena.Options and of arena.FitOptions but the checkpoint sizes, set
// (each to a value other than its zero, which everyFieldSet checks) and
// unset.
func TestPlaceOptionsRoundTrip(t *testing.T) {
	config := llamaConfig(t)
	for _, tc := range []struct {
		name string
		opts arena.Options
		fo   arena.FitOptions
		po   PlaceOptions
	}{
		{name: "defaults"},
		{name: "every option set",
			opts: arena.Options{MaxBatchTokens: 4096, MaxSeqLen: 200_000, KVBlockSize: 32, MaxBatchSize: 64, KMax: new(int64(0)),
				LoRAMaxRank: 16, FP8Rowwise: true, Q2Prefill: true, LogitsRows: arena.LogitsSampled, KVCacheDType: "fp8_e5m2",
				MambaSSMCacheDType: "float32", AllowLongMaxSeqLen: true},
			fo: arena.FitOptions{GPUMemoryUtilization: new(0.85), ReserveBytes: new(int64(0)), UtilizationScope: arena.UtilizationInstance,
				SamplerWarmup: arena.SamplerWarmupAfterKVCache, CUDAGraphs: arena.CUDAGraphsEstimated, ExcludeWeights: true,
				Weights: arena.WeightOptions{DType: arena.FP8, IncludeMTP: true, CheckpointLayout: true, MXFP4Backend: arena.MXFP4Backend(3)}},
			po: PlaceOptions{TensorParallelSize: 2, PipelineParallelSize: 3}},
		{name: "k_max and reserve set",
			opts: arena.Options{KMax: new(int64(5)), KVCacheDType: "bf16"},
			fo:   arena.FitOptions{ReserveBytes: new(int64(3 << 30)), Weights: arena.WeightOptions{DType: arena.BF16}}},
		{name: "f32 weights", fo: arena.FitOptions{Weights: arena.WeightOptions{DType: arena.F32}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "every option set" {
				everyFieldSet(t, tc.opts, tc.fo, tc.po)
			}
			req, err := PlaceRequestFor(config, tc.opts, tc.fo, tc.po)
			if err != nil {
				t.Fatal(err)
			}
			wire, err := proto.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			got := &nodepb.PlaceRequest{}
			if err := proto.Unmarshal(wire, got); err != nil {
				t.Fatal(err)
			}
			cfg, opts, fo, po, err := placeArgs(got)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.ModelType != "llama" {
				t.Fatalf("config model_type %q, want llama", cfg.ModelType)
			}
			if !reflect.DeepEqual(opts, tc.opts) {
				t.Errorf("options: got %+v, want %+v", opts, tc.opts)
			}
			if !reflect.DeepEqual(fo, tc.fo) {
				t.Errorf("fit options: got %+v, want %+v", fo, tc.fo)
			}
			if po != tc.po {
				t.Errorf("place options: got %+v, want %+v", po, tc.po)
			}
		})
	}
}

// everyFieldSet fails the test for a field of opts, fo (and its Weights)
// or po left at its zero value, but the checkpoint sizes, which
// PlaceRequestFor refuses: a field added to arena.Options or
// arena.FitOptions must be set in the round trip's "every option set",
// and so carried by PlaceRequest.
func everyFieldSet(t *testing.T, opts arena.Options, fo arena.FitOptions, po PlaceOptions) {
	t.Helper()
	for _, v := range []reflect.Value{reflect.ValueOf(opts), reflect.ValueOf(fo), reflect.ValueOf(fo.Weights), reflect.ValueOf(po)} {
		for i := range v.NumField() {
			f := v.Type().Field(i)
			switch f.Name {
			case "CheckpointWeightBytes", "CheckpointPooledTensorBytes", "Weights":
				continue
			}
			if v.Field(i).IsZero() {
				t.Errorf("%s.%s is not set in the case of every option", v.Type().Name(), f.Name)
			}
		}
	}
}

func TestPlaceOptionsRefusals(t *testing.T) {
	config := llamaConfig(t)
	for _, tc := range []struct {
		name string
		opts arena.Options
		fo   arena.FitOptions
	}{
		{name: "checkpoint bytes", fo: arena.FitOptions{CheckpointWeightBytes: new(int64(1))}},
		{name: "checkpoint tensors", fo: arena.FitOptions{CheckpointPooledTensorBytes: []int64{1}}},
		{name: "u8 weights", fo: arena.FitOptions{Weights: arena.WeightOptions{DType: arena.U8}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r, err := PlaceRequestFor(config, tc.opts, tc.fo, PlaceOptions{}); !errors.Is(err, gpuarena.ErrInvalidValue) {
				t.Fatalf("PlaceRequestFor: %v, %v; want ErrInvalidValue", r, err)
			}
		})
	}
	for _, tc := range []struct {
		name   string
		req    *nodepb.PlaceRequest
		option string // the *arena.OptionError's option, "" for none
	}{
		{"bad config", &nodepb.PlaceRequest{ConfigJson: []byte("{")}, ""},
		{"kv_cache_dtype", &nodepb.PlaceRequest{ConfigJson: config, KvCacheDtype: "int3"}, "kv_cache_dtype"},
		{"logits_rows", &nodepb.PlaceRequest{ConfigJson: config, LogitsRows: "some"}, "logits_rows"},
		{"k_max", &nodepb.PlaceRequest{ConfigJson: config, KMax: new(int64(arena.MaxKMax + 1))}, "k_max"},
		{"gpu_memory_utilization", &nodepb.PlaceRequest{ConfigJson: config, GpuMemoryUtilization: 1.5}, "gpu_memory_utilization"},
		{"reserve_bytes", &nodepb.PlaceRequest{ConfigJson: config, ReserveBytes: new(int64(-1))}, "reserve_bytes"},
		{"utilization_scope", &nodepb.PlaceRequest{ConfigJson: config, UtilizationScope: "host"}, "utilization_scope"},
		{"sampler_warmup", &nodepb.PlaceRequest{ConfigJson: config, SamplerWarmup: "always"}, "sampler_warmup"},
		{"cuda_graphs", &nodepb.PlaceRequest{ConfigJson: config, CudaGraphs: "always"}, "cuda_graphs"},
		{"mxfp4_backend", &nodepb.PlaceRequest{ConfigJson: config, Mxfp4Backend: "cuda"}, "mxfp4_backend"},
		{"weight_dtype", &nodepb.PlaceRequest{ConfigJson: config, WeightDtype: "int4"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, _, err := placeArgs(tc.req)
			if !errors.Is(err, gpuarena.ErrInvalidValue) {
				t.Fatalf("placeArgs: %v, want ErrInvalidValue", err)
			}
			var oe *arena.OptionError
			if tc.option != "" && (!errors.As(err, &oe) || oe.Option != tc.option) {
				t.Fatalf("placeArgs: %v, want an *arena.OptionError for %s", err, tc.option)
			}
		})
	}
}

// FuzzPlaceRequest decodes arbitrary bytes as a PlaceRequest and reads its
// options: never a panic, and options read once come back equal through
// PlaceRequestFor.
func FuzzPlaceRequest(f *testing.F) {
	config := llamaConfig(f)
	for _, r := range []*nodepb.PlaceRequest{
		{ConfigJson: config},
		{ConfigJson: config, MaxBatchTokens: 1024, KMax: new(int64(0)), KvCacheDtype: "fp8", WeightDtype: "fp8", ReserveBytes: new(int64(7))},
	} {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, wire []byte) {
		req := &nodepb.PlaceRequest{}
		if proto.Unmarshal(wire, req) != nil {
			return
		}
		_, opts, fo, po, err := placeArgs(req)
		if err != nil {
			return
		}
		again, err := PlaceRequestFor(req.GetConfigJson(), opts, fo, po)
		if err != nil {
			t.Fatalf("options read from %v refused on the way back: %v", req, err)
		}
		_, opts2, fo2, po2, err := placeArgs(again)
		if err != nil || !reflect.DeepEqual(opts, opts2) || !reflect.DeepEqual(fo, fo2) || po != po2 {
			t.Fatalf("round trip of %v: %+v %+v %+v (%v), want %+v %+v %+v", req, opts2, fo2, po2, err, opts, fo, po)
		}
	})
}
