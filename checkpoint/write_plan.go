package checkpoint

import (
	"cmp"
	"fmt"
	"slices"
)

// plannedTensor is a TensorSpec placed in a shard.
type plannedTensor struct {
	spec  TensorSpec
	bytes int64
	begin int64 // in the shard's data area
}

// plannedShard is one file Write will write.
type plannedShard struct {
	name    string          // file name in the folder
	tensors []plannedTensor // in data order
	bytes   int64           // data area size
}

// planShards splits specs (with their byte sizes) into shards the way
// huggingface_hub's split_state_dict_into_shards_factory does (transformers'
// save_pretrained calls it): walk the tensors in the given order; a tensor
// larger than maxBytes gets a shard of its own, appended at once; a tensor
// that would take the current shard past maxBytes closes it first. One shard
// is named model.safetensors, more are model-00001-of-0000N.safetensors.
// Within a shard the data is ordered as the reference writer orders it
// (safetensors/src/tensor.rs, prepare): by dtype, widest first (the Dtype
// enum's order, which DType follows), then by name.
func planShards(specs []TensorSpec, sizes []int64, maxBytes int64) []plannedShard {
	var groups [][]int
	var cur []int
	var curBytes int64
	for i, n := range sizes {
		if n > maxBytes {
			groups = append(groups, []int{i})
			continue
		}
		if curBytes+n > maxBytes && len(cur) > 0 {
			groups = append(groups, cur)
			cur, curBytes = nil, 0
		}
		cur = append(cur, i)
		curBytes += n
	}
	if len(cur) > 0 || len(groups) == 0 {
		groups = append(groups, cur)
	}
	shards := make([]plannedShard, len(groups))
	for g, members := range groups {
		s := &shards[g]
		if len(groups) == 1 {
			s.name = SingleFileName
		} else {
			s.name = fmt.Sprintf("model-%05d-of-%05d.safetensors", g+1, len(groups))
		}
		slices.SortStableFunc(members, func(a, b int) int {
			return cmp.Or(cmp.Compare(specs[b].DType, specs[a].DType), cmp.Compare(specs[a].Name, specs[b].Name))
		})
		for _, i := range members {
			s.tensors = append(s.tensors, plannedTensor{spec: specs[i], bytes: sizes[i], begin: s.bytes})
			s.bytes += sizes[i]
		}
	}
	return shards
}
