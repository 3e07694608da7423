package kvcache

import (
	"errors"
	"strings"
	"testing"
)

func TestNewRefusesBadConfig(t *testing.T) {
	full := GroupConfig{Name: "full", Kind: FullAttention, Blocks: 8, BlockSize: 16}
	with := func(f func(g *GroupConfig)) []GroupConfig {
		g := full
		f(&g)
		return []GroupConfig{g}
	}
	for _, tc := range []struct {
		name   string
		groups []GroupConfig
		field  string
	}{
		{"no groups", nil, "Groups"},
		{"no name", with(func(g *GroupConfig) { g.Name = "" }), "Name"},
		{"same name", []GroupConfig{full, full}, "Name"},
		{"no kind", with(func(g *GroupConfig) { g.Kind = 0 }), "Kind"},
		{"only the null block", with(func(g *GroupConfig) { g.Blocks = 1 }), "Blocks"},
		{"too many blocks", with(func(g *GroupConfig) { g.Blocks = MaxBlocks + 1 }), "Blocks"},
		{"zero block size", with(func(g *GroupConfig) { g.BlockSize = 0 }), "BlockSize"},
		{"huge block size", with(func(g *GroupConfig) { g.BlockSize = MaxBlockSize + 1 }), "BlockSize"},
		{"window on full", with(func(g *GroupConfig) { g.Window = 128 }), "Window"},
		{"sliding without window", with(func(g *GroupConfig) { g.Kind = SlidingWindow }), "Window"},
		{"state without slots", []GroupConfig{{Name: "s", Kind: State}}, "Blocks"},
		{"state with block size", []GroupConfig{{Name: "s", Kind: State, Blocks: 2, BlockSize: 16}}, "BlockSize"},
		{"block sizes without a small lcm", []GroupConfig{
			{Name: "a", Kind: FullAttention, Blocks: 4, BlockSize: 65521},
			{Name: "b", Kind: FullAttention, Blocks: 4, BlockSize: 65519},
		}, "BlockSize"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(Config{Groups: tc.groups})
			var ce *ConfigError
			if p != nil || !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("New = %v, %v; want a *ConfigError on %s", p, err, tc.field)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %s", err, tc.field)
			}
		})
	}
}

func TestExhaustedErrorIsTyped(t *testing.T) {
	p, err := New(Config{Groups: []GroupConfig{{Name: "kv", Kind: FullAttention, Blocks: 3, BlockSize: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	r := p.Apply(Step{Admit: []Admit{{Seq: 1, Tokens: make([]int32, 9)}}})
	if len(r.Errors) != 1 {
		t.Fatalf("errors %v, want one", r.Errors)
	}
	var ex *ExhaustedError
	if !errors.Is(r.Errors[0].Err, ErrExhausted) || !errors.As(r.Errors[0].Err, &ex) {
		t.Fatalf("error %v is not an *ExhaustedError", r.Errors[0].Err)
	}
	want := ExhaustedError{Op: OpAdmit, Seq: 1, Group: 0, Name: "kv", Kind: FullAttention, Asked: 3, Free: 2}
	if *ex != want {
		t.Errorf("got %+v, want %+v", *ex, want)
	}
	if c := p.Counts()[0]; c.Free != 2 || c.Used != 0 || p.Len() != 0 {
		t.Errorf("a refused admission left counts %+v and %d sequences", c, p.Len())
	}
}

func TestNames(t *testing.T) {
	for v, want := range map[interface{ String() string }]string{
		FullAttention: "full_attention", SlidingWindow: "sliding_window", State: "state", Kind(9): "Kind(9)",
		OpFree: "free", OpFork: "fork", OpAppend: "append", OpAdmit: "admission", OpTable: "block table", Op(0): "op?",
	} {
		if got := v.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}
