package kvcache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/gpuarena/gpuarena/arena"
)

// TestScripts runs the scripts in testdata/steps: each is a pool and
// steps whose results were worked out by hand. After every command the
// pool's invariants must hold. Regenerate the expected output, then
// review its diff, with
//
//	go test ./kvcache -run TestScripts -rewrite
//
// The command language (TOKENS is token ids and inclusive ranges joined by
// commas: 0..127,500,7):
//
//	pool [hash=constant]   a pool of the groups the input lines give, one
//	                       a line: NAME full|sliding|state blocks=N
//	                       [block-size=B] [window=W]
//	pool model=FILE blocks=N [slots=N] [block-size=16]
//	                       a pool for examples/configs/FILE, its groups
//	                       from arena.NewKVLayout: full_attention when it
//	                       has paged layers, sliding_window (its window)
//	                       when it has sliding layers, state (slots) when
//	                       it has GDN or Mamba-2 layers
//	step                   one Apply; input lines, in any order:
//	                       free ID | fork PARENT CHILD |
//	                       append ID tokens=TOKENS |
//	                       admit ID tokens=TOKENS [extra=S] [new=N] |
//	                       tables group=G rows=R width=W ids=IDS
//	                       (new: MaxNewTokens; tables: Step.Tables,
//	                       printed after the step)
//	probe tokens=TOKENS [extra=S]
//	                       CachedPrefix
//	reset                  ResetPrefixCache
//	write-tables group=G rows=R width=W IDS
//	                       WriteBlockTables of the sequences IDS (1,2,...)
//
// A step prints each admission's cached tokens, each refused request and
// its error's sentinels, the copies, then every group's counts and every
// sequence's tables (runs of consecutive blocks as a-b, null blocks as
// 0×N), and the prefix stats.
func TestScripts(t *testing.T) {
	scripts, err := filepath.Glob("testdata/steps/*.txt")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no scripts in testdata/steps (%v)", err)
	}
	for _, path := range scripts {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			var p *Pool
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				out, err := runScript(t, &p, d)
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				if p != nil {
					if err := p.Check(); err != nil {
						d.Fatalf(t, "after %s: %v", d.Cmd, err)
					}
				}
				return out
			})
		})
	}
}

func runScript(t *testing.T, pp **Pool, d *datadriven.TestData) (string, error) {
	switch d.Cmd {
	case "pool":
		p, about, err := scriptPool(d)
		if err != nil {
			return "", err
		}
		*pp = p
		var b strings.Builder
		b.WriteString(about)
		for i := range p.groups {
			g := &p.groups[i].cfg
			fmt.Fprintf(&b, "group %d %s: %s blocks=%d block-size=%d window=%d\n", i, g.Name, g.Kind, g.Blocks, g.BlockSize, g.Window)
		}
		fmt.Fprintf(&b, "prefix caching: %v\n", p.PrefixCaching())
		return b.String(), nil
	}
	p := *pp
	if p == nil {
		return "", fmt.Errorf("%s before pool", d.Cmd)
	}
	switch d.Cmd {
	case "step":
		s, err := scriptStep(d.Input)
		if err != nil {
			return "", err
		}
		return printStep(p, s, p.Apply(s)), nil
	case "probe":
		var spec, extra string
		d.ScanArgs(t, "tokens", &spec)
		d.MaybeScanArgs(t, "extra", &extra)
		toks, err := parseTokens(spec)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("cached %d\n", p.CachedPrefix(toks, []byte(extra))), nil
	case "reset":
		if err := p.ResetPrefixCache(); err != nil {
			return "error " + errorClass(err) + ": " + err.Error() + "\n", nil
		}
		return "ok\n" + printCounts(p), nil
	case "write-tables":
		var group, rows, width int
		d.ScanArgs(t, "group", &group)
		d.ScanArgs(t, "rows", &rows)
		d.ScanArgs(t, "width", &width)
		var ids []SeqID
		for _, f := range strings.Split(d.CmdArgs[len(d.CmdArgs)-1].Key, ",") {
			id, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				return "", err
			}
			ids = append(ids, SeqID(id))
		}
		dst := make([]int32, rows*width)
		if err := p.WriteBlockTables(dst, TableShape{Rows: rows, Width: width}, group, ids); err != nil {
			return "error " + errorClass(err) + ": " + err.Error() + "\n", nil
		}
		var b strings.Builder
		for r := range rows {
			fmt.Fprintln(&b, dst[r*width:(r+1)*width])
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("unknown command %q", d.Cmd)
}

// scriptPool builds the pool a pool command describes, and says what it
// read of a model.
func scriptPool(d *datadriven.TestData) (*Pool, string, error) {
	var cfg Config
	about := ""
	for _, a := range d.CmdArgs {
		switch a.Key {
		case "hash":
			cfg.Hash = func(uint64, []int32, []byte) uint64 { return 0 }
		case "model":
			groups, layers, err := modelGroups(d)
			if err != nil {
				return nil, "", err
			}
			cfg.Groups, about = groups, layers
		}
	}
	for _, line := range nonEmptyLines(d.Input) {
		f := strings.Fields(line)
		if len(f) < 2 {
			return nil, "", fmt.Errorf("group line %q: want NAME KIND key=value...", line)
		}
		g := GroupConfig{Name: f[0], Kind: map[string]Kind{"full": FullAttention, "sliding": SlidingWindow, "state": State}[f[1]]}
		for _, kv := range f[2:] {
			k, v, _ := strings.Cut(kv, "=")
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, "", fmt.Errorf("group line %q: %v", line, err)
			}
			switch k {
			case "blocks":
				g.Blocks = n
			case "block-size":
				g.BlockSize = n
			case "window":
				g.Window = n
			default:
				return nil, "", fmt.Errorf("group line %q: unknown key %q", line, k)
			}
		}
		cfg.Groups = append(cfg.Groups, g)
	}
	p, err := New(cfg)
	return p, about, err
}

// modelGroups is the groups of an example model's KV layout, and the
// layer counts it read.
func modelGroups(d *datadriven.TestData) ([]GroupConfig, string, error) {
	var file string
	blocks, slots, blockSize := 0, 0, 16
	for _, a := range d.CmdArgs {
		var err error
		switch a.Key {
		case "model":
			file = a.Vals[0]
		case "blocks":
			blocks, err = strconv.Atoi(a.Vals[0])
		case "slots":
			slots, err = strconv.Atoi(a.Vals[0])
		case "block-size":
			blockSize, err = strconv.Atoi(a.Vals[0])
		}
		if err != nil {
			return nil, "", err
		}
	}
	cfg, err := arena.LoadConfig(filepath.Join("..", "examples", "configs", file))
	if err != nil {
		return nil, "", err
	}
	l, err := arena.NewKVLayout(cfg, int64(blockSize))
	if err != nil {
		return nil, "", err
	}
	var groups []GroupConfig
	if l.PagedLayers > 0 {
		groups = append(groups, GroupConfig{Name: "full_attention", Kind: FullAttention, Blocks: blocks, BlockSize: blockSize})
	}
	if l.SlidingLayers > 0 {
		groups = append(groups, GroupConfig{Name: "sliding_window", Kind: SlidingWindow, Blocks: blocks, BlockSize: blockSize, Window: int(l.SlidingWindow)})
	}
	if l.StateLayers > 0 {
		groups = append(groups, GroupConfig{Name: "state", Kind: State, Blocks: slots})
	}
	layers := fmt.Sprintf("layers: paged %d, sliding %d (window %d), state %d\n", l.PagedLayers, l.SlidingLayers, l.SlidingWindow, l.StateLayers)
	return groups, layers, nil
}

// scriptStep parses a step's request lines.
func scriptStep(input string) (Step, error) {
	var s Step
	for _, line := range nonEmptyLines(input) {
		f := strings.Fields(line)
		var ids []SeqID
		var toks []int32
		var extra []byte
		ints := map[string]int{}
		for _, w := range f[1:] {
			k, v, isKV := strings.Cut(w, "=")
			var err error
			switch {
			case !isKV:
				var id uint64
				id, err = strconv.ParseUint(w, 10, 64)
				ids = append(ids, SeqID(id))
			case k == "tokens":
				toks, err = parseTokens(v)
			case k == "extra":
				extra = []byte(v)
			case k == "ids":
				for _, x := range strings.Split(v, ",") {
					var id uint64
					if id, err = strconv.ParseUint(x, 10, 64); err != nil {
						break
					}
					ids = append(ids, SeqID(id))
				}
			case k == "new" || k == "group" || k == "rows" || k == "width":
				ints[k], err = strconv.Atoi(v)
			default:
				err = fmt.Errorf("unknown key %q", k)
			}
			if err != nil {
				return s, fmt.Errorf("step line %q: %v", line, err)
			}
		}
		switch {
		case f[0] == "free" && len(ids) == 1:
			s.Free = append(s.Free, ids[0])
		case f[0] == "fork" && len(ids) == 2:
			s.Fork = append(s.Fork, Fork{Parent: ids[0], Child: ids[1]})
		case f[0] == "append" && len(ids) == 1:
			s.Append = append(s.Append, Append{Seq: ids[0], Tokens: toks})
		case f[0] == "admit" && len(ids) == 1:
			s.Admit = append(s.Admit, Admit{Seq: ids[0], Tokens: toks, Extra: extra, MaxNewTokens: ints["new"]})
		case f[0] == "tables":
			shape := TableShape{Rows: ints["rows"], Width: ints["width"]}
			s.Tables = &TableRequest{Group: ints["group"], Shape: shape, Batch: ids, Dst: make([]byte, 4*shape.Rows*shape.Width)}
		default:
			return s, fmt.Errorf("step line %q: want free ID, fork PARENT CHILD, append ID tokens=T, admit ID tokens=T [extra=S] [new=N] or tables group=G rows=R width=W ids=IDS", line)
		}
	}
	return s, nil
}

// parseTokens reads "0..3,9" as [0 1 2 3 9]; "" is no tokens.
func parseTokens(spec string) ([]int32, error) {
	var toks []int32
	if spec == "" {
		return toks, nil
	}
	for _, part := range strings.Split(spec, ",") {
		lo, hi, isRange := strings.Cut(part, "..")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("tokens %q: %v", spec, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("tokens %q: %v", spec, err)
			}
		}
		for v := a; v <= b; v++ {
			toks = append(toks, int32(v))
		}
	}
	return toks, nil
}

func nonEmptyLines(s string) []string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// printStep prints a step's result and the pool after it.
func printStep(p *Pool, s Step, r StepResult) string {
	var b strings.Builder
	for i, a := range s.Admit {
		fmt.Fprintf(&b, "admit %d: cached %d of %d\n", a.Seq, r.CachedTokens[i], len(a.Tokens))
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "refused %s[%d]: %s: %v\n", e.Op, e.Index, errorClass(e.Err), e.Err)
	}
	for _, c := range r.Copies {
		fmt.Fprintf(&b, "copy group %d seq %d: %d -> %d\n", c.Group, c.Seq, c.Src, c.Dst)
	}
	b.WriteString(printCounts(p))
	ids := make([]SeqID, 0, len(p.seqs))
	for id := range p.seqs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		tables, _ := p.BlockTable(id)
		fmt.Fprintf(&b, "seq %d (%d tokens):", id, p.seqs[id].tokens)
		for i, t := range tables {
			fmt.Fprintf(&b, " %s %s", p.groups[i].cfg.Name, compactTable(t, p.groups[i].cfg.Kind.paged()))
		}
		b.WriteString("\n")
	}
	if p.PrefixCaching() {
		st := p.PrefixStats()
		fmt.Fprintf(&b, "prefix: queries %d hits %d queried tokens %d hit tokens %d\n", st.Queries, st.Hits, st.QueriedTokens, st.HitTokens)
	}
	if t := s.Tables; t != nil {
		if r.TablesErr != nil {
			fmt.Fprintf(&b, "tables: error %s: %v\n", errorClass(r.TablesErr), r.TablesErr)
			return b.String()
		}
		for row := range t.Shape.Rows {
			vals := make([]int32, t.Shape.Width)
			for i := range vals {
				vals[i] = int32(binary.LittleEndian.Uint32(t.Dst[4*(row*t.Shape.Width+i):]))
			}
			fmt.Fprintf(&b, "tables row %d: %v\n", row, vals)
		}
	}
	return b.String()
}

func printCounts(p *Pool) string {
	var b strings.Builder
	for i, c := range p.Counts() {
		fmt.Fprintf(&b, "%s: total %d free %d cached %d used %d\n", p.groups[i].cfg.Name, c.Total, c.Free, c.Cached, c.Used)
	}
	return b.String()
}

// compactTable prints [0×3 7-9 4 5] for the paged table [0 0 0 7 8 9 4
// 5]; a state table as it is.
func compactTable(t []int32, paged bool) string {
	if !paged {
		return fmt.Sprint(t)
	}
	var parts []string
	for i := 0; i < len(t); {
		j := i + 1
		if t[i] == NullBlock {
			for j < len(t) && t[j] == NullBlock {
				j++
			}
			parts = append(parts, fmt.Sprintf("0×%d", j-i))
		} else {
			for j < len(t) && t[j] == t[j-1]+1 {
				j++
			}
			if j-i < 3 {
				j = i + 1
				parts = append(parts, fmt.Sprint(t[i]))
			} else {
				parts = append(parts, fmt.Sprintf("%d-%d", t[i], t[j-1]))
			}
		}
		i = j
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// errorClass names the sentinels err is.
func errorClass(err error) string {
	var names []string
	for _, s := range []struct {
		name string
		err  error
	}{
		{"ErrExhausted", ErrExhausted}, {"ErrUnknownSequence", ErrUnknownSequence},
		{"ErrDuplicateSequence", ErrDuplicateSequence}, {"ErrNoTokens", ErrNoTokens},
		{"ErrCacheInUse", ErrCacheInUse}, {"ErrTableLayout", ErrTableLayout},
	} {
		if errors.Is(err, s.err) {
			names = append(names, s.name)
		}
	}
	return strings.Join(names, ",")
}
