package arena

import (
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// validPlan is a hand-made valid plan: hidden_states [512, 1024] BF16 (1 MiB),
// logits [512, 3072] BF16 (3 MiB), one slab "w" of 4 MiB; every other buffer
// absent.
func validPlan() *Plan {
	const mib = 1 << 20
	p := &Plan{ModelType: "test"}
	for i := range p.Buffers {
		p.Buffers[i] = Buffer{ID: BufferID(i), Absent: "not in the test plan"}
	}
	p.Buffers[HiddenStates] = Buffer{ID: HiddenStates, DType: BF16, Shape: []int64{512, 1024}, Bytes: 1 * mib}
	p.Buffers[Logits] = Buffer{ID: Logits, DType: BF16, Shape: []int64{512, 3072}, Bytes: 3 * mib}
	p.Slabs = []SlabSpec{{Name: "w", Bytes: 4 * mib}}
	p.BufferBytes, p.SlabBytes, p.TotalBytes = 4*mib, 4*mib, 8*mib
	return p
}

func TestValidateAcceptsPlanForPlans(t *testing.T) {
	if err := validPlan().Validate(); err != nil {
		t.Fatalf("hand-made plan: %v", err)
	}
	optionSets := []struct {
		name string
		opts Options
	}{
		{"defaults", DefaultOptions()},
		{"small batch", Options{MaxBatchTokens: 64}},
		{"rowwise slab and lora", Options{MaxBatchTokens: 512, FP8Rowwise: true, LoRAMaxRank: 16}},
	}
	for _, path := range exampleConfigs(t) {
		for _, o := range optionSets {
			t.Run(filepath.Base(path)+"/"+o.name, func(t *testing.T) {
				_, plan := planExample(t, filepath.Base(path), o.opts)
				if err := plan.Validate(); err != nil {
					t.Fatalf("PlanFor's plan refused: %v", err)
				}
			})
		}
	}
}

func TestValidateRefusesBrokenPlans(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name     string
		plan     func() *Plan
		field    string
		value    any
		overflow bool     // the error also matches ErrOverflow
		words    []string // the message names these
	}{
		{"nil plan", func() *Plan { return nil }, "plan", nil, false, []string{"nil plan", "arena.PlanFor"}},
		{"zero plan", func() *Plan { return &Plan{} }, "buffers", nil, false, []string{"no buffers", "arena.PlanFor"}},
		{"no present buffer, slabs only", func() *Plan {
			p := validPlan()
			for _, id := range []BufferID{HiddenStates, Logits} {
				p.Buffers[id] = Buffer{ID: id, Absent: "dropped"}
			}
			p.BufferBytes, p.TotalBytes = 0, p.SlabBytes
			return p
		}, "buffers", nil, false, []string{"no buffers"}},
		{"buffer id out of place", func() *Plan { p := validPlan(); p.Buffers[Residual].ID = Logits; return p },
			"buffers[1].id", "logits", false, []string{"want residual"}},
		{"negative bytes", func() *Plan { p := validPlan(); p.Buffers[Residual].Bytes = -1; return p },
			"buffers[residual].bytes", int64(-1), false, []string{"≥ 0"}},
		{"absent buffer with bytes", func() *Plan { p := validPlan(); p.Buffers[Logits].Absent = "no vocab"; return p },
			"buffers[logits].absent", "no vocab", false, []string{"3145728 B"}},
		{"zero bytes without a reason", func() *Plan { p := validPlan(); p.Buffers[Residual].Absent = ""; return p },
			"buffers[residual].absent", "", false, []string{"0 B", "must say why"}},
		{"absent buffer with a shape", func() *Plan { p := validPlan(); p.Buffers[Residual].Shape = []int64{512, 1024}; return p },
			"buffers[residual].shape", []int64{512, 1024}, false, []string{"nil"}},
		{"slab without a name", func() *Plan { p := validPlan(); p.Slabs[0].Name = ""; return p },
			"slabs[0].name", "", false, []string{"empty name"}},
		{"duplicate slab", func() *Plan { p := validPlan(); p.Slabs = append(p.Slabs, p.Slabs[0]); return p },
			`slabs["w"].name`, "w", false, []string{`"w"`, "twice"}},
		{"slab of 0 B", func() *Plan { p := validPlan(); p.Slabs[0].Bytes = 0; return p },
			`slabs["w"].bytes`, int64(0), false, []string{"> 0"}},
		{"wrong buffer_bytes", func() *Plan { p := validPlan(); p.BufferBytes++; return p },
			"buffer_bytes", int64(4*mib + 1), false, []string{"4194304 B"}},
		{"wrong slab_bytes", func() *Plan { p := validPlan(); p.SlabBytes = 0; return p },
			"slab_bytes", int64(0), false, []string{"4194304 B"}},
		{"wrong total_bytes", func() *Plan { p := validPlan(); p.TotalBytes = 4 * mib; return p },
			"total_bytes", int64(4 * mib), false, []string{"8388608 B"}},
		{"buffers that overflow", func() *Plan { p := validPlan(); p.Buffers[Logits].Bytes = math.MaxInt64; return p },
			"buffer_bytes", int64(4 * mib), true, []string{"logits"}},
		{"slabs that overflow", func() *Plan {
			p := validPlan()
			p.Slabs = append(p.Slabs, SlabSpec{Name: "v", Bytes: math.MaxInt64})
			return p
		}, "slab_bytes", int64(4 * mib), true, []string{`slab "v"`}},
		{"bytes that disagree with the shape", func() *Plan {
			p := validPlan()
			p.Buffers[Logits].Bytes = 100 * mib
			p.BufferBytes, p.TotalBytes = 101*mib, 105*mib
			return p
		}, "buffers[logits].bytes", int64(100 * mib), false, []string{"[512 3072]", "3145728 B"}},
		{"present buffer without a dtype", func() *Plan { p := validPlan(); p.Buffers[Logits].DType = 0; return p },
			"buffers[logits].bytes", int64(3 * mib), false, []string{"dtype(0)"}},
		{"negative shape dimensions", func() *Plan { p := validPlan(); p.Buffers[Logits].Shape = []int64{-512, -3072}; return p },
			"buffers[logits].shape", []int64{-512, -3072}, false, []string{"> 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.plan().Validate()
			var pe *PlanError
			if !errors.Is(err, ErrInvalidPlan) || !errors.As(err, &pe) {
				t.Fatalf("Validate = %v, want a *PlanError", err)
			}
			if pe.Field != tt.field || !equalValue(pe.Value, tt.value) {
				t.Fatalf("field %q = %#v, want %q = %#v (%v)", pe.Field, pe.Value, tt.field, tt.value, err)
			}
			if errors.Is(err, ErrOverflow) != tt.overflow {
				t.Fatalf("errors.Is(%v, ErrOverflow) = %v, want %v", err, !tt.overflow, tt.overflow)
			}
			for _, w := range append([]string{tt.field}, tt.words...) {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

// equalValue compares PlanError values, slices by element.
func equalValue(a, b any) bool { return reflect.DeepEqual(a, b) }
