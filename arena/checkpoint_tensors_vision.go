package arena

import (
	"fmt"
	"strconv"
	"strings"
)

// The groups of a multimodal model's vision tensors (weights_vision.go).
const (
	groupVisionTower = "vision_tower"
	groupProjector   = "multimodal_projector"
)

// isVisionGroup reports whether group is a vision tower's or a projector's.
func isVisionGroup(group string) bool { return group == groupVisionTower || group == groupProjector }

// vision lists the vision tower's and projector's tensors, idx into ts, in
// their order, each under the checkpoint name its family gave it: a
// tensor repeated per block ("*" in its name) block by block (every
// tensor of block 0, then of block 1), where the first of its run stands.
// A tower whose names are not known (VisionViT) is a *CheckpointNamesError.
func (l *lister) vision(ts []WeightTensor, orgs []tensorOrigin, idx []int) {
	for at := 0; at < len(idx) && l.err == nil; {
		i := idx[at]
		name := orgs[i].checkpoint
		if name == "" {
			l.err = &CheckpointNamesError{ModelType: l.cfg.ModelType, Reason: fmt.Sprintf(
				"tensor %s: the checkpoint names of vision_config.model_type %q are not listed", ts[i].Name, clip(l.cfg.Vision.ModelType))}
			return
		}
		if !strings.Contains(name, "*") {
			l.visionTensor(name, ts[i], orgs[i])
			at++
			continue
		}
		end := at
		for end < len(idx) && strings.Contains(orgs[idx[end]].checkpoint, "*") && ts[idx[end]].Count == ts[i].Count {
			end++
		}
		for b := range ts[i].Count {
			for _, j := range idx[at:end] {
				l.visionTensor(strings.Replace(orgs[j].checkpoint, "*", strconv.FormatInt(b, 10), 1), ts[j], orgs[j])
			}
		}
		at = end
	}
}

// visionTensor lists one instance of t under name: its shape as torch
// stores it (a projection [in, out] as nn.Linear's [out, in]) and its
// dtype.
func (l *lister) visionTensor(name string, t WeightTensor, o tensorOrigin) {
	d, ok := l.dtype(t.Format)
	if !ok {
		l.err = &CheckpointNamesError{ModelType: l.cfg.ModelType, Reason: fmt.Sprintf("tensor %s: %v is not listed", name, t.Format)}
		return
	}
	shape := append([]int64(nil), t.Shape...)
	if len(shape) == 2 && o.kind == kindHigh {
		shape[0], shape[1] = shape[1], shape[0]
	}
	l.add(name, d, shape)
}
