package arena

import (
	"fmt"
	"strings"
)

// KVCacheDType is kv_cache_dtype, the element type of the KV cache (paged
// and sliding-window layers), with vLLM's meaning (vllm/config/cache.py
// CacheDType): "auto" is the model's dtype, "fp8" is "fp8_e4m3". The
// zero value is "auto".
type KVCacheDType string

// The kv_cache_dtype values arena sizes. ParseKVCacheDType also accepts
// "bf16", "fp16" and "half".
const (
	KVCacheAuto     KVCacheDType = "auto"
	KVCacheBF16     KVCacheDType = "bfloat16"
	KVCacheFP16     KVCacheDType = "float16"
	KVCacheFP8      KVCacheDType = "fp8"
	KVCacheFP8E4M3  KVCacheDType = "fp8_e4m3"
	KVCacheFP8E5M2  KVCacheDType = "fp8_e5m2"
	kvCacheDTypeAll              = "auto, bfloat16 (bf16), float16 (fp16), fp8 (= fp8_e4m3), fp8_e4m3, fp8_e5m2"
)

// ParseKVCacheDType reads a kv_cache_dtype, case-insensitive: "" and "auto"
// are KVCacheAuto; "bf16" is "bfloat16"; "fp16" and "half" are "float16".
// Errors: an *OptionError for "kv_cache_dtype" naming the accepted values
// (vLLM's others, such as fp8_inc or nvfp4, are not sized here).
func ParseKVCacheDType(s string) (KVCacheDType, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return KVCacheAuto, nil
	case "bfloat16", "bf16":
		return KVCacheBF16, nil
	case "float16", "fp16", "half":
		return KVCacheFP16, nil
	case "fp8":
		return KVCacheFP8, nil
	case "fp8_e4m3":
		return KVCacheFP8E4M3, nil
	case "fp8_e5m2":
		return KVCacheFP8E5M2, nil
	}
	return "", &OptionError{Option: "kv_cache_dtype", Value: clip(s), Reason: "want one of " + kvCacheDTypeAll}
}

// Element is the dtype kv_cache_dtype stores for cfg, by its name and size
// in bytes: auto is the model dtype (modelDType), fp8 is fp8_e4m3 (1 byte);
// per-tensor fp8 scales (one per layer) are not counted. d must be parsed
// (ParseKVCacheDType); an unknown d is reported as auto.
func (d KVCacheDType) Element(cfg *ModelConfig) (name string, bytes int64) {
	switch d {
	case KVCacheBF16:
		return string(KVCacheBF16), 2
	case KVCacheFP16:
		return string(KVCacheFP16), 2
	case KVCacheFP8, KVCacheFP8E4M3:
		return string(KVCacheFP8E4M3), 1
	case KVCacheFP8E5M2:
		return string(KVCacheFP8E5M2), 1
	}
	return modelDType(cfg), 2
}

// modelDType is the dtype vLLM computes in for cfg with --dtype auto
// (vllm/config/model.py _resolve_auto_dtype): "float16" for a float16
// torch_dtype, else "bfloat16" (a float32 model is downcast to bfloat16 on
// GPUs that have it; a config without torch_dtype, as gpt-oss's, is read
// from its weights, bfloat16 for every model arena knows).
func modelDType(cfg *ModelConfig) string {
	if cfg != nil {
		switch strings.ToLower(cfg.TorchDType) {
		case "float16", "half", "fp16":
			return string(KVCacheFP16)
		}
	}
	return string(KVCacheBF16)
}

// SSMCacheDType is mamba_ssm_cache_dtype, the element type of the recurrent
// (SSM) state of GDN and Mamba-2 layers, with vLLM's meaning
// (vllm/config/cache.py MambaDType). The zero value is "auto".
type SSMCacheDType string

// The mamba_ssm_cache_dtype values. ParseSSMCacheDType also accepts
// "bf16", "fp16", "half", "fp32" and "float".
const (
	SSMCacheAuto    SSMCacheDType = "auto"
	SSMCacheFloat32 SSMCacheDType = "float32"
	SSMCacheFloat16 SSMCacheDType = "float16"
	SSMCacheBF16    SSMCacheDType = "bfloat16"
)

// ParseSSMCacheDType reads a mamba_ssm_cache_dtype, case-insensitive: ""
// and "auto" are SSMCacheAuto. Errors: an *OptionError for
// "mamba_ssm_cache_dtype" naming the accepted values.
func ParseSSMCacheDType(s string) (SSMCacheDType, error) {
	if d, ok := ssmDTypeAlias(s); ok {
		return d, nil
	}
	return "", &OptionError{Option: "mamba_ssm_cache_dtype", Value: clip(s),
		Reason: "want one of auto, float32 (fp32), float16 (fp16), bfloat16 (bf16)"}
}

// ssmDTypeAlias is s as an SSMCacheDType; ok is false for an unknown name.
func ssmDTypeAlias(s string) (SSMCacheDType, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return SSMCacheAuto, true
	case "float32", "fp32", "f32", "float":
		return SSMCacheFloat32, true
	case "float16", "fp16", "half":
		return SSMCacheFloat16, true
	case "bfloat16", "bf16":
		return SSMCacheBF16, true
	}
	return "", false
}

// ssmStateElement is the recurrent state's dtype (name, bytes) of cfg's
// layers under the option d, as vLLM resolves mamba_ssm_cache_dtype:
//
//   - set (not auto): that dtype;
//   - auto, with the config stating mamba_ssm_cache_dtype: the config's
//     (vLLM's NemotronH hook, vllm/model_executor/models/config.py
//     NemotronHForCausalLMConfig.update_mamba_ssm_cache_dtype);
//   - auto otherwise, Mamba-2 layers (mamba2): float32, that hook's
//     DEFAULT_MAMBA_SSM_CACHE_DTYPE ("only float32 is known to have no
//     accuracy issues"); Nemotron-H is the one family with Mamba-2 layers;
//   - auto otherwise, GDN layers: the conv state's dtype, the model dtype
//     (vllm/model_executor/layers/mamba/mamba_utils.py
//     MambaStateDtypeCalculator._mamba_state_dtype).
//
// note says what was assumed when a config value is not known (sized as
// float32) or when auto followed the model dtype; "" otherwise.
func ssmStateElement(cfg *ModelConfig, d SSMCacheDType, mamba2 bool) (name string, bytes int64, note string) {
	if d == "" || d == SSMCacheAuto {
		stated, ok := ssmDTypeAlias(cfg.MambaSSMCacheDType)
		switch {
		case !ok:
			return string(SSMCacheFloat32), 4, fmt.Sprintf("config mamba_ssm_cache_dtype %q is not known: the recurrent state is sized as float32",
				clip(cfg.MambaSSMCacheDType))
		case stated != SSMCacheAuto:
			d = stated
		case mamba2:
			d = SSMCacheFloat32
		default:
			name := modelDType(cfg)
			return name, 2, fmt.Sprintf("mamba_ssm_cache_dtype auto: the recurrent state follows the model dtype (%s), as vLLM's does; "+
				"set mamba_ssm_cache_dtype float32 for a float32 state", name)
		}
	}
	if d == SSMCacheFloat32 {
		return string(d), 4, ""
	}
	return string(d), 2, ""
}
