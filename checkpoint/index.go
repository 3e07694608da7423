package checkpoint

import (
	"io"
	"math"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Names of a Hugging Face checkpoint's files in a model folder
// (transformers' SAFE_WEIGHTS_NAME and SAFE_WEIGHTS_INDEX_NAME).
const (
	// SingleFileName is the file of an unsharded checkpoint.
	SingleFileName = "model.safetensors"
	// IndexFileName is the index of a sharded one.
	IndexFileName = "model.safetensors.index.json"
)

// index is a parsed model.safetensors.index.json. The format is the one
// transformers writes (modeling_utils.py, save_pretrained) and reads
// (utils/hub.py, get_checkpoint_shard_files):
//
//	{"metadata": {"total_size": 16060522496}, "weight_map": {"lm_head.weight": "model-00004-of-00004.safetensors", ...}}
//
// The shards are sorted(set(weight_map.values())), relative to the index's
// folder.
type index struct {
	weightMap map[string]string // tensor → shard name, cleaned (path.Clean)
	shards    []string          // the distinct shard names, sorted
	totalSize int64
	hasTotal  bool
}

// readIndex reads and parses the index at p (an open regular file of size
// bytes), at most MaxIndexBytes of it.
func readIndex(f io.ReaderAt, p string, size int64) (*index, error) {
	if size > MaxIndexBytes {
		return nil, fail(ErrBadIndex, p, "", "the index is "+strconv.FormatInt(size, 10)+" bytes, more than MaxIndexBytes ("+
			strconv.Itoa(MaxIndexBytes)+")")
	}
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil && !(err == io.EOF && size == 0) {
		return nil, readFailed(p, "the index", err)
	}
	return parseIndex(p, data)
}

// parseIndex parses an index: a JSON object whose "weight_map" is a
// non-empty object of tensor name → shard file name, and whose optional
// "metadata" object may hold "total_size", a non-negative integer number
// of bytes. Other keys are ignored, as transformers ignores them. Errors:
// ErrBadIndex (not JSON, no weight_map, a shard name that is empty, absolute
// or leaves the index's folder, more than MaxShards shards, a bad
// total_size), ErrDuplicateTensor (a tensor twice in weight_map).
func parseIndex(p string, data []byte) (*index, error) {
	w, err := newWalker(p, data, ErrBadIndex, "index")
	if err != nil {
		return nil, err
	}
	if err := w.open('{', "", "the index"); err != nil {
		return nil, err
	}
	ix := &index{}
	seen := make(map[string]bool)
	config := false // a model_type or architectures key: a config.json
	for first := true; w.next('}', first); first = false {
		key := w.key()
		if seen[key] {
			return nil, fail(ErrBadIndex, p, "", "the index has the key "+quote(key)+" twice")
		}
		seen[key] = true
		switch key {
		case "weight_map":
			if ix.weightMap, err = w.weightMap(); err != nil {
				return nil, err
			}
		case "metadata":
			if err := w.indexMetadata(ix); err != nil {
				return nil, err
			}
		case "model_type", "architectures":
			config = true
			w.skip()
		default:
			w.skip()
		}
	}
	if ix.weightMap == nil && config {
		return nil, fail(ErrBadIndex, p, "", "this is a model's config.json, not a checkpoint's index (no weight_map): give the model folder, which holds both")
	}
	if ix.weightMap == nil {
		return nil, fail(ErrBadIndex, p, "", "the index has no weight_map (the map of tensor name to shard file)")
	}
	if len(ix.weightMap) == 0 {
		return nil, fail(ErrBadIndex, p, "", "the index's weight_map is empty: it names no tensor and no shard")
	}
	set := make(map[string]struct{})
	for _, s := range ix.weightMap {
		set[s] = struct{}{}
	}
	if len(set) > MaxShards {
		return nil, fail(ErrBadIndex, p, "", "the index names "+strconv.Itoa(len(set))+" shards, more than MaxShards ("+strconv.Itoa(MaxShards)+")")
	}
	for s := range set {
		ix.shards = append(ix.shards, s)
	}
	slices.Sort(ix.shards)
	return ix, nil
}

// weightMap reads weight_map, checking each shard name.
func (w *walker) weightMap() (map[string]string, error) {
	if err := w.open('{', "", "weight_map"); err != nil {
		return nil, err
	}
	m := make(map[string]string)
	clean := make(map[string]string) // shard name as written → cleaned, computed once per shard
	for first := true; w.next('}', first); first = false {
		name := w.key()
		if _, dup := m[name]; dup {
			return nil, fail(ErrDuplicateTensor, w.file, name, "weight_map lists this tensor twice")
		}
		if !w.isString() {
			return nil, fail(ErrBadIndex, w.file, name, "weight_map maps it to "+w.describe()+": it must be a shard file name")
		}
		raw, escaped := w.rawStr()
		c, ok := clean[string(raw)] // keyed by the text as written: a shard's name repeats, its check need not
		if !ok {
			shard := string(raw)
			if escaped {
				shard = unquote(raw)
			}
			if !localName(shard) {
				return nil, fail(ErrBadIndex, w.file, name, "weight_map maps it to "+quote(shard)+
					": a shard must be a relative path inside the index's folder")
			}
			c = path.Clean(shard)
			clean[string(raw)] = c
		}
		m[name] = c
	}
	return m, nil
}

// localName reports whether a shard name stays inside the index's folder:
// not empty, not absolute, no ".." that leaves it, no NUL byte.
func localName(name string) bool {
	return name != "" && !strings.ContainsRune(name, 0) && filepath.IsLocal(filepath.FromSlash(name)) && path.Clean(name) != "."
}

// indexMetadata reads metadata: null, or an object whose total_size, when
// present, is a non-negative integer (an integral float such as 1.6e10 is
// taken too, since some converters write one). Its other keys are skipped.
func (w *walker) indexMetadata(ix *index) error {
	if w.isNull() {
		return nil
	}
	if err := w.open('{', "", "metadata"); err != nil {
		return err
	}
	for first := true; w.next('}', first); first = false {
		if w.key() != "total_size" {
			w.skip()
			continue
		}
		if ix.hasTotal {
			return fail(ErrBadIndex, w.file, "", "metadata has total_size twice")
		}
		num := w.number()
		if num == "" {
			return fail(ErrBadIndex, w.file, "", "metadata.total_size is "+w.describe()+": it must be a number of bytes")
		}
		n, ok := parseSize(num)
		if !ok {
			return fail(ErrBadIndex, w.file, "", "metadata.total_size = "+cut(num)+": it must be a non-negative integer below 2^63")
		}
		ix.totalSize, ix.hasTotal = n, true
	}
	return nil
}

// parseSize parses a JSON number that is a non-negative integer below 2^63,
// written as an integer or as an integral float exact in float64.
func parseSize(s string) (int64, bool) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, n >= 0
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f != math.Trunc(f) || f > 1<<53 {
		return 0, false
	}
	return int64(f), true
}
