package gpuworker

import (
	"errors"
	"slices"
	"testing"
)

func TestParseImagePTX(t *testing.T) {
	src := `// a comment .entry fake(
.version 7.0
.target sm_80
.address_size 64
/* .entry hidden( */
.visible .entry a(
	.param .u64 .ptr .global .align 8 a_param_0,
	.param .align 8 .b8 a_param_1[16],
	.param .f32 a_param_2
)
.maxntid 256, 1, 1
{ ret; }
.entry b
{ ret; }
.weak .entry c()
{ ret; }
`
	format, got, err := parseImage([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []kernelEntry{{"a", []int{8, 16, 4}}, {"b", []int{}}, {"c", []int{}}}
	if format != FormatPTX || !slices.EqualFunc(got, want, func(x, y kernelEntry) bool { return x.name == y.name && slices.Equal(x.params, y.params) }) {
		t.Fatalf("parseImage = %s %+v, want ptx %+v", format, got, want)
	}
}

func TestParseImageRefuses(t *testing.T) {
	for _, bad := range []string{
		"",
		"no directives at all",
		".version 7.0\n.target sm_80\n.entry a(.param .u64 p\n{ ret; }",    // no ')'
		".version 7.0\n.target sm_80\n.entry a(.param .weird p)\n{ ret; }", // unknown type
		".version 7.0\n.target sm_80\n.entry a(.param .b8 p[0])\n{ ret; }", // empty array
		".version 7.0\n.target sm_80\n.entry a()\n{}\n.entry a()\n{}",      // twice
		".version 7.0\n.target sm_80\n.entry (.param .u32 p)\n{}",          // no name
		"\x50\xed\x55\xba fatbin",
		"\x7fELF not really",
	} {
		if _, _, err := parseImage([]byte(bad)); !errors.Is(err, ErrBadModule) {
			t.Errorf("parseImage(%q): got %v, want ErrBadModule", bad, err)
		}
	}
}

// FuzzParseImage: any bytes parse or are refused with ErrBadModule, never
// a panic, and every kernel found has a name.
func FuzzParseImage(f *testing.F) {
	f.Add([]byte(".version 7.0\n.target sm_80\n.entry k(.param .u64 p, .param .u32 q)\n{ ret; }"))
	f.Add([]byte("\x7fELF"))
	f.Add([]byte(".version 7.0 .target sm_80 .entry x"))
	f.Fuzz(func(t *testing.T, image []byte) {
		_, ks, err := parseImage(image)
		if err != nil {
			if !errors.Is(err, ErrBadModule) {
				t.Fatalf("error %v is not ErrBadModule", err)
			}
			return
		}
		for _, k := range ks {
			if k.name == "" {
				t.Fatal("a kernel without a name")
			}
		}
	})
}
