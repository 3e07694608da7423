package arena

import "fmt"

// SlabSSMRowwiseW is the name of the row-wise slab: the BF16 copies of every
// GDN layer's in_proj_qkvz and out_proj weights used by the FP8 row-wise path.
const SlabSSMRowwiseW = "ssm_rowwise_w_bf16"

// PlanFor sizes the arena for cfg under opts (zero fields take their
// defaults; the resolved options are in Plan.Options): one Buffer per
// BufferID from the rules table (design.md §5), the slabs, and their totals
// in bytes. It touches no device. Errors: an *OptionError for a bad option
// (see Options.Resolve and NewDecodeMetaLayout), an *OverflowError naming the
// buffer whose size overflows int64, a *ConfigError for a nil or
// hand-built ModelConfig whose sizes are not positive or that lacks the
// sub-config its model_type's family reads.
func PlanFor(cfg *ModelConfig, opts Options) (*Plan, error) {
	if err := cfg.checkSizes(); err != nil {
		return nil, err
	}
	_, shape, err := shapeOf(cfg)
	if err != nil {
		return nil, err
	}
	if m := shape.mamba; m != nil && m.ChunkSize <= 0 {
		return nil, &ConfigError{Field: "chunk_size", Value: m.ChunkSize, Reason: "must be positive"}
	}
	o, err := opts.Resolve(cfg)
	if err != nil {
		return nil, err
	}
	meta, err := NewDecodeMetaLayout(o.MaxBatchSize, o.MaxSeqLen, o.KVBlockSize)
	if err != nil {
		return nil, err
	}
	plan := &Plan{
		ModelType:  cfg.ModelType,
		Notes:      append([]string(nil), cfg.Notes...),
		Options:    o,
		DecodeMeta: meta,
	}
	p := &planner{cfg: cfg, shape: shape, opts: o, meta: meta}
	for _, id := range BufferIDs() {
		p.what = id.String()
		s := rules[id](p)
		b := Buffer{ID: id, Absent: s.absent}
		if s.absent == "" {
			b.Bytes = p.mul(append(s.dims, s.dtype.Size())...)
			if b.Bytes > 0 {
				b.DType, b.Shape = s.dtype, s.dims
			} else {
				b.Bytes, b.Absent = 0, fmt.Sprintf("zero-sized %v", s.dims)
			}
		}
		plan.BufferBytes = p.add(plan.BufferBytes, b.Bytes)
		if p.err != nil {
			return nil, p.err
		}
		plan.Buffers[id] = b
	}
	if o.FP8Rowwise {
		if p.hasGDN() {
			slab, err := rowwiseSlab(cfg, shape.gdn)
			if err != nil {
				return nil, err
			}
			plan.Slabs = append(plan.Slabs, slab)
			plan.SlabBytes = slab.Bytes
		} else {
			plan.Notes = append(plan.Notes, "fp8_rowwise is on but the model has no GDN layers: no "+SlabSSMRowwiseW+" slab")
		}
	}
	if plan.TotalBytes, err = CheckedAdd("plan total", plan.BufferBytes, plan.SlabBytes); err != nil {
		return nil, err
	}
	if limit, source := cfg.MaxSeqLenLimit(); limit > 0 && o.MaxSeqLen > limit {
		plan.Notes = append(plan.Notes, fmt.Sprintf("max_seq_len %d exceeds the model's limit of %d tokens (%s): allowed by allow_long_max_seq_len",
			o.MaxSeqLen, limit, source))
	}
	return plan, nil
}

// rowwiseSlab sizes ssm_rowwise_w_bf16 for the GDN dims g: num_GDN_layers
// × (in_proj_qkvz [H, 2·nk·dk + 2·nv·dv] + out_proj [nv·dv, H]) BF16
// (design.md §5).
func rowwiseSlab(cfg *ModelConfig, g *GDNConfig) (SlabSpec, error) {
	p := &planner{sizer: sizer{what: SlabSSMRowwiseW}, cfg: cfg, shape: modelShape{gdn: g}}
	perLayer := p.add(p.mul(cfg.HiddenSize, p.gdnQKVZ()), p.mul(g.NumValueHeads, g.ValueHeadDim, cfg.HiddenSize))
	bytes := p.mul(cfg.Counts.GDN, perLayer, BF16.Size())
	if p.err != nil {
		return SlabSpec{}, p.err
	}
	return SlabSpec{Name: SlabSSMRowwiseW, Bytes: bytes}, nil
}

// checkSizes rejects a nil ModelConfig, or one built by hand whose sizes the
// rules multiply or divide by are not positive (ParseConfig never returns
// one); PlanFor checks the Mamba-2 chunk_size, which its family's shape
// gives, after it.
func (c *ModelConfig) checkSizes() error {
	if c == nil {
		return &ConfigError{Reason: "nil *ModelConfig"}
	}
	fields := []struct {
		name string
		v    int64
	}{
		{"hidden_size", c.HiddenSize},
		{"num_hidden_layers", int64(len(c.Layers))},
		{"num_attention_heads", c.NumAttentionHeads},
		{"num_key_value_heads", c.NumKVHeads},
		{"head_dim", c.HeadDim},
		{"vocab_size", c.VocabSize},
	}
	for _, f := range fields {
		if f.v <= 0 {
			return &ConfigError{Field: f.name, Value: f.v, Reason: "must be positive"}
		}
	}
	return nil
}
