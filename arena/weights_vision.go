package arena

import "strings"

// The vision towers' tensors, from the Hugging Face modeling files named on
// each function. Each tensor is added under its checkpoint name, "*" for
// the encoder block index, with ActiveCount 0 (a text token reads none of
// them), projections as [in, out] (kindHigh: the base dtype, never
// quantized), convolutions and position embeddings in torch's layout.

// vt adds count instances of the vision tensor named ckpt in the
// checkpoint. Its role (WeightTensor.Name) is ckpt without the block
// index and ".weight".
func (w *weightBuilder) vt(ckpt, group string, kind tensorKind, count int64, shape ...int64) {
	name := strings.TrimSuffix(strings.Replace(ckpt, ".*", "", 1), ".weight")
	w.tensorAs(name, group, kind, count, 0, shape, tensorForm{checkpoint: ckpt})
}

// linear adds count nn.Linear(in, out) named p (p.weight, and p.bias
// with bias) in group.
func (w *weightBuilder) linear(p, group string, count, in, out int64, bias bool) {
	w.vt(p+".weight", group, kindHigh, count, in, out)
	if bias {
		w.vt(p+".bias", group, kindVector, count, out)
	}
}

// layerNorm adds count nn.LayerNorm(dim) named p: weight and bias.
func (w *weightBuilder) layerNorm(p, group string, count, dim int64) {
	w.vt(p+".weight", group, kindVector, count, dim)
	w.vt(p+".bias", group, kindVector, count, dim)
}

// visionTower adds v's tensors, as its kind builds them.
func (w *weightBuilder) visionTower(v *VisionConfig) {
	switch v.Kind {
	case VisionSigLIP:
		w.siglip("vision_tower.vision_model.", v)
	case VisionCLIP:
		w.clip("vision_tower.vision_model.", v)
	case VisionQwen25VL:
		w.qwen25VisionTower("visual.", v)
	case VisionPixtral:
		w.pixtral("vision_tower.", v)
	default:
		w.vit(v)
	}
}

// vitEncoder adds the n encoder layers of SiglipEncoderLayer
// (modeling_siglip.py) and CLIPEncoderLayer (modeling_clip.py), under
// p+"encoder.layers.*.": layer_norm1, self_attn q/k/v/out_proj [H, H] with
// biases, layer_norm2, mlp fc1 [H, I] and fc2 [I, H] with biases.
func (w *weightBuilder) vitEncoder(p string, v *VisionConfig) {
	h, n := v.HiddenSize, v.NumLayers
	p += "encoder.layers.*."
	const g = groupVisionTower
	w.layerNorm(p+"layer_norm1", g, n, h)
	for _, proj := range []string{"q_proj", "k_proj", "v_proj", "out_proj"} {
		w.linear(p+"self_attn."+proj, g, n, h, h, true)
	}
	w.layerNorm(p+"layer_norm2", g, n, h)
	w.linear(p+"mlp.fc1", g, n, h, v.IntermediateSize, true)
	w.linear(p+"mlp.fc2", g, n, v.IntermediateSize, h, true)
}

// siglip adds a SigLIP vision transformer under p (modeling_siglip.py
// SiglipVisionTransformer): embeddings.patch_embedding, a Conv2d [H, C, P,
// P] with bias [H], and position_embedding [(image_size/P)², H]; the
// encoder (vitEncoder); post_layernorm; with vision_use_head the
// attention-pooling head (SiglipMultiheadAttentionPoolingHead: probe [1,
// 1, H], nn.MultiheadAttention in_proj [3H, H] and out_proj [H, H] with
// biases, layernorm, mlp fc1 and fc2).
func (w *weightBuilder) siglip(p string, v *VisionConfig) {
	h, pt := v.HiddenSize, v.PatchSize
	const g = groupVisionTower
	side := v.ImageSize / pt
	w.vt(p+"embeddings.patch_embedding.weight", g, kindVector, 1, h, v.NumChannels, pt, pt)
	w.vt(p+"embeddings.patch_embedding.bias", g, kindVector, 1, h)
	w.vt(p+"embeddings.position_embedding.weight", g, kindVector, 1, w.mul(side, side), h)
	w.vitEncoder(p, v)
	w.layerNorm(p+"post_layernorm", g, 1, h)
	if v.UseHead {
		w.vt(p+"head.probe", g, kindVector, 1, 1, 1, h)
		w.vt(p+"head.attention.in_proj_weight", g, kindVector, 1, w.mul(3, h), h)
		w.vt(p+"head.attention.in_proj_bias", g, kindVector, 1, w.mul(3, h))
		w.linear(p+"head.attention.out_proj", g, 1, h, h, true)
		w.layerNorm(p+"head.layernorm", g, 1, h)
		w.linear(p+"head.mlp.fc1", g, 1, h, v.IntermediateSize, true)
		w.linear(p+"head.mlp.fc2", g, 1, v.IntermediateSize, h, true)
	}
}

// clip adds a CLIP vision transformer under p (modeling_clip.py
// CLIPVisionTransformer): embeddings.class_embedding [H],
// patch_embedding, a Conv2d [H, C, P, P] without bias, and
// position_embedding [(image_size/P)² + 1, H]; pre_layrnorm (sic); the
// encoder (vitEncoder); post_layernorm. The checkpoint's every layer is
// counted, though LLaVA reads the features of vision_feature_layer and
// vLLM builds no layer past it (an over-estimate of at most one layer).
func (w *weightBuilder) clip(p string, v *VisionConfig) {
	h, pt := v.HiddenSize, v.PatchSize
	const g = groupVisionTower
	side := v.ImageSize / pt
	w.vt(p+"embeddings.class_embedding", g, kindVector, 1, h)
	w.vt(p+"embeddings.patch_embedding.weight", g, kindVector, 1, h, v.NumChannels, pt, pt)
	w.vt(p+"embeddings.position_embedding.weight", g, kindVector, 1, w.add(w.mul(side, side), 1), h)
	w.layerNorm(p+"pre_layrnorm", g, 1, h)
	w.vitEncoder(p, v)
	w.layerNorm(p+"post_layernorm", g, 1, h)
}

// qwen25VisionTower adds Qwen2.5-VL's vision transformer under p
// (modeling_qwen2_5_vl.py Qwen2_5_VisionTransformerPretrainedModel):
// patch_embed.proj, a Conv3d [H, C, T, P, P] without bias; per block
// (depth of them) norm1 and norm2 (RMSNorm [H]), attn.qkv [H, 3H] and
// attn.proj [H, H] with biases, and mlp gate_proj, up_proj [H, I] and
// down_proj [I, H] with biases (Qwen2_5_VLMLP, bias=True); and the patch
// merger (Qwen2_5_VLPatchMerger): ln_q (RMSNorm [H]), mlp.0 [H·S², H·S²]
// and mlp.2 [H·S², out_hidden_size] with biases (S = spatial_merge_size).
func (w *weightBuilder) qwen25VisionTower(p string, v *VisionConfig) {
	h, i, n := v.HiddenSize, v.IntermediateSize, v.NumLayers
	const g = groupVisionTower
	w.vt(p+"patch_embed.proj.weight", g, kindVector, 1, h, v.NumChannels, v.TemporalPatchSize, v.PatchSize, v.PatchSize)
	b := p + "blocks.*."
	w.vt(b+"norm1.weight", g, kindVector, n, h)
	w.vt(b+"norm2.weight", g, kindVector, n, h)
	w.linear(b+"attn.qkv", g, n, h, w.mul(3, h), true)
	w.linear(b+"attn.proj", g, n, h, h, true)
	w.linear(b+"mlp.gate_proj", g, n, h, i, true)
	w.linear(b+"mlp.up_proj", g, n, h, i, true)
	w.linear(b+"mlp.down_proj", g, n, i, h, true)
	merged := w.mul(h, v.SpatialMergeSize, v.SpatialMergeSize)
	w.vt(p+"merger.ln_q.weight", g, kindVector, 1, h)
	w.linear(p+"merger.mlp.0", g, 1, merged, merged, true)
	w.linear(p+"merger.mlp.2", g, 1, merged, v.OutHiddenSize, true)
}

// pixtral adds Pixtral's vision encoder under p (modeling_pixtral.py
// PixtralVisionModel): patch_conv, a Conv2d [H, C, P, P] without bias;
// ln_pre (RMSNorm [H]); per layer (PixtralAttentionLayer) attention_norm
// and ffn_norm (RMSNorm [H]), attention q/k/v/o_proj [H, H] and
// feed_forward gate_proj, up_proj [H, I] and down_proj [I, H], none with a
// bias. Its positions are rotary: no position embedding.
func (w *weightBuilder) pixtral(p string, v *VisionConfig) {
	h, i, n := v.HiddenSize, v.IntermediateSize, v.NumLayers
	const g = groupVisionTower
	w.vt(p+"patch_conv.weight", g, kindVector, 1, h, v.NumChannels, v.PatchSize, v.PatchSize)
	w.vt(p+"ln_pre.weight", g, kindVector, 1, h)
	l := p + "transformer.layers.*."
	w.vt(l+"attention_norm.weight", g, kindVector, n, h)
	for _, proj := range []string{"q_proj", "k_proj", "v_proj", "o_proj"} {
		w.linear(l+"attention."+proj, g, n, h, h, false)
	}
	w.vt(l+"ffn_norm.weight", g, kindVector, n, h)
	w.linear(l+"feed_forward.gate_proj", g, n, h, i, false)
	w.linear(l+"feed_forward.up_proj", g, n, h, i, false)
	w.linear(l+"feed_forward.down_proj", g, n, i, h, false)
}

// vit adds a vision tower arena does not name (VisionViT) as a plain ViT
// of v's sizes: a patch Conv2d [H, C, P, P] with bias and the encoder
// layers of vitEncoder; no position embedding (its size is the tower's
// own). Its checkpoint names are not known, so CheckpointTensors refuses it.
func (w *weightBuilder) vit(v *VisionConfig) {
	h, pt := v.HiddenSize, v.PatchSize
	const g = groupVisionTower
	n := v.NumLayers
	w.tensor("vision.patch_embedding", g, kindVector, 1, 0, h, v.NumChannels, pt, pt)
	w.tensor("vision.patch_embedding.bias", g, kindVector, 1, 0, h)
	for _, t := range []struct {
		name string
		kind tensorKind
		dims []int64
	}{
		{"vision.encoder.layers.layer_norm1", kindVector, []int64{2, h}},
		{"vision.encoder.layers.self_attn.qkvo", kindHigh, []int64{h, w.mul(4, h)}},
		{"vision.encoder.layers.self_attn.qkvo.bias", kindVector, []int64{w.mul(4, h)}},
		{"vision.encoder.layers.layer_norm2", kindVector, []int64{2, h}},
		{"vision.encoder.layers.mlp.fc1", kindHigh, []int64{h, v.IntermediateSize}},
		{"vision.encoder.layers.mlp.fc1.bias", kindVector, []int64{v.IntermediateSize}},
		{"vision.encoder.layers.mlp.fc2", kindHigh, []int64{v.IntermediateSize, h}},
		{"vision.encoder.layers.mlp.fc2.bias", kindVector, []int64{h}},
	} {
		w.tensor(t.name, g, t.kind, n, 0, t.dims...)
	}
}
