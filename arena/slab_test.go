package arena

import (
	"errors"
	"math"
	"testing"
)

func TestCarveSlabBumps(t *testing.T) {
	const capacity = 4096
	used := int64(0)
	steps := []struct{ n, align, offset, used int64 }{
		{100, 256, 0, 100},
		{100, 256, 256, 356},
		{1, 1, 356, 357},
		{512, 512, 512, 1024},
		{3072, 256, 1024, 4096}, // exactly fills the slab
	}
	for i, s := range steps {
		off, nu, err := CarveSlab(capacity, used, s.n, s.align)
		if err != nil || off != s.offset || nu != s.used {
			t.Fatalf("step %d: (%d, %d, %v), want (%d, %d)", i, off, nu, err, s.offset, s.used)
		}
		used = nu
	}
}

func TestCarveSlabErrors(t *testing.T) {
	tests := []struct {
		name                     string
		capacity, used, n, align int64
		sentinel                 error
		message                  string
	}{
		{"exhausted", 4096, 4000, 100, 1, ErrSlabExhausted,
			"arena: slab exhausted: asked 100 B (align 1) with 4000 of 4096 B used (96 B left)"},
		{"exhausted by alignment", 4096, 3900, 100, 256, ErrSlabExhausted, ""},
		{"absent", 0, 0, 64, 256, ErrSlabAbsent,
			"arena: slab absent: asked 64 B (align 256) with 0 of 0 B used (0 B left)"},
		{"zero bytes", 4096, 0, 0, 256, ErrInvalidCarve, ""},
		{"align not power of two", 4096, 0, 64, 3, ErrInvalidCarve, ""},
		{"align zero", 4096, 0, 64, 0, ErrInvalidCarve, ""},
		{"used past capacity", 4096, 5000, 64, 1, ErrInvalidCarve, ""},
		{"negative used", 4096, -1, 64, 1, ErrInvalidCarve, ""},
		{"end overflows", math.MaxInt64, math.MaxInt64 - 10, 100, 1, ErrSlabExhausted, ""},
		{"offset overflows", math.MaxInt64, math.MaxInt64 - 10, 1, 1 << 62, ErrSlabExhausted, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			off, nu, err := CarveSlab(tt.capacity, tt.used, tt.n, tt.align)
			var se *SlabError
			if !errors.Is(err, tt.sentinel) || !errors.As(err, &se) || off != 0 || nu != 0 {
				t.Fatalf("(%d, %d, %v), want %v", off, nu, err, tt.sentinel)
			}
			if se.Asked != tt.n || se.Align != tt.align || se.Used != tt.used || se.Capacity != tt.capacity {
				t.Errorf("error sizes %+v", se)
			}
			if tt.message != "" && err.Error() != tt.message {
				t.Errorf("message %q, want %q", err, tt.message)
			}
		})
	}
}
