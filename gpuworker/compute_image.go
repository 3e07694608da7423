package gpuworker

import (
	"bytes"
	"debug/elf"
	"fmt"
	"strconv"
	"strings"
)

// Module image formats (device.Module.Format).
const (
	FormatPTX   = "ptx"
	FormatCubin = "cubin"
)

// kernelEntry is one kernel an image declares: its name and its
// parameters' sizes in bytes (nil when the image does not say).
type kernelEntry struct {
	name   string
	params []int
}

// parseImage finds what kind of image a module is and the kernels it
// declares: for PTX text, every .entry and its .param list (PTX ISA,
// "Kernel Function Parameters"); for a cubin (an ELF), every global
// function symbol of a .text.<name> section, parameters unknown. The same
// parse runs for every backend, so a step's launches are checked alike on
// each. Errors wrap ErrBadModule: an image that is neither, a fatbin
// (load the PTX or the cubin it holds), PTX without .version and .target,
// an .entry whose parameter list does not parse, a kernel declared twice.
func parseImage(image []byte) (string, []kernelEntry, error) {
	switch {
	case len(image) == 0:
		return "", nil, fmt.Errorf("%w: the image is empty", ErrBadModule)
	case bytes.HasPrefix(image, []byte(elf.ELFMAG)):
		k, err := cubinEntries(image)
		return FormatCubin, k, err
	case bytes.HasPrefix(image, []byte{0x50, 0xed, 0x55, 0xba}):
		return "", nil, fmt.Errorf("%w: a fatbin; load the PTX or the cubin for the device instead", ErrBadModule)
	}
	k, err := ptxEntries(string(image))
	return FormatPTX, k, err
}

// ptxEntries parses the .entry directives of PTX text.
func ptxEntries(src string) ([]kernelEntry, error) {
	src = stripPTXComments(src)
	if !hasDirective(src, ".version") || !hasDirective(src, ".target") {
		return nil, fmt.Errorf("%w: neither a cubin (ELF) nor PTX text (no .version and .target directives)", ErrBadModule)
	}
	var out []kernelEntry
	seen := map[string]bool{}
	for rest := src; ; {
		i := indexDirective(rest, ".entry")
		if i < 0 {
			break
		}
		rest = rest[i+len(".entry"):]
		name, after := ptxIdent(rest)
		if name == "" {
			return nil, fmt.Errorf("%w: PTX .entry without a kernel name", ErrBadModule)
		}
		if seen[name] {
			return nil, fmt.Errorf("%w: PTX .entry %s declared twice", ErrBadModule, name)
		}
		seen[name] = true
		rest = after
		params := []int{}
		if t := strings.TrimLeft(rest, " \t\r\n"); strings.HasPrefix(t, "(") {
			end := strings.IndexByte(t, ')')
			if end < 0 {
				return nil, fmt.Errorf("%w: PTX .entry %s: its parameter list has no closing parenthesis", ErrBadModule, name)
			}
			var err error
			if params, err = ptxParams(name, t[1:end]); err != nil {
				return nil, err
			}
			rest = t[end+1:]
		}
		out = append(out, kernelEntry{name: name, params: params})
	}
	return out, nil
}

// ptxParams parses an .entry's comma-separated .param declarations into
// their sizes in bytes: ".param .u64 p0", ".param .align 8 .b8 p1[16]",
// ".param .u64 .ptr .global .align 4 p2".
func ptxParams(kernel, list string) ([]int, error) {
	if strings.TrimSpace(list) == "" {
		return []int{}, nil
	}
	decls := strings.Split(list, ",")
	sizes := make([]int, 0, len(decls))
	for i, d := range decls {
		f := strings.Fields(d)
		if len(f) < 3 || f[0] != ".param" {
			return nil, fmt.Errorf("%w: PTX .entry %s: parameter %d %q is not a .param declaration", ErrBadModule, kernel, i, strings.TrimSpace(d))
		}
		size := 0
		for _, tok := range f[1 : len(f)-1] {
			if n, ok := ptxTypeBytes[tok]; ok && size == 0 {
				size = n
			}
		}
		if size == 0 {
			return nil, fmt.Errorf("%w: PTX .entry %s: parameter %d %q has no type this parser knows", ErrBadModule, kernel, i, strings.TrimSpace(d))
		}
		name := f[len(f)-1]
		if open := strings.IndexByte(name, '['); open >= 0 {
			n, err := strconv.Atoi(strings.TrimSuffix(name[open+1:], "]"))
			if err != nil || !strings.HasSuffix(name, "]") || n <= 0 || n > 1<<16 {
				return nil, fmt.Errorf("%w: PTX .entry %s: parameter %d %q has a bad array length", ErrBadModule, kernel, i, strings.TrimSpace(d))
			}
			size *= n
		}
		sizes = append(sizes, size)
	}
	return sizes, nil
}

// ptxTypeBytes is the size of each PTX fundamental type a .param may have
// (PTX ISA "Fundamental Types"); references (.texref, ...) are 8-byte
// handles.
var ptxTypeBytes = map[string]int{
	".b8": 1, ".u8": 1, ".s8": 1,
	".b16": 2, ".u16": 2, ".s16": 2, ".f16": 2, ".bf16": 2,
	".b32": 4, ".u32": 4, ".s32": 4, ".f32": 4, ".f16x2": 4, ".bf16x2": 4,
	".b64": 8, ".u64": 8, ".s64": 8, ".f64": 8,
	".b128":   16,
	".texref": 8, ".samplerref": 8, ".surfref": 8,
}

// stripPTXComments removes // and /* */ comments.
func stripPTXComments(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "//"):
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				return b.String()
			}
			i += j
		case strings.HasPrefix(s[i:], "/*"):
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				return b.String()
			}
			b.WriteByte(' ')
			i += j + 4
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String()
}

// indexDirective is the index of directive in s as a whole token (not a
// prefix of a longer one), or -1.
func indexDirective(s, directive string) int {
	for off := 0; ; {
		i := strings.Index(s[off:], directive)
		if i < 0 {
			return -1
		}
		i += off
		end := i + len(directive)
		before := i == 0 || !isPTXIdentByte(s[i-1])
		after := end == len(s) || !isPTXIdentByte(s[end])
		if before && after {
			return i
		}
		off = end
	}
}

func hasDirective(s, directive string) bool { return indexDirective(s, directive) >= 0 }

// ptxIdent reads the identifier after leading white space: [a-zA-Z_$%]
// followed by [a-zA-Z0-9_$%]. It returns "" when there is none.
func ptxIdent(s string) (string, string) {
	t := strings.TrimLeft(s, " \t\r\n")
	n := 0
	for n < len(t) && isPTXIdentByte(t[n]) && (n > 0 || t[n] < '0' || t[n] > '9') {
		n++
	}
	return t[:n], t[n:]
}

func isPTXIdentByte(c byte) bool {
	return c == '_' || c == '$' || c == '%' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// cubinEntries lists a cubin's kernels: its global function symbols that
// have a .text.<name> section of their own.
func cubinEntries(image []byte) ([]kernelEntry, error) {
	f, err := elf.NewFile(bytes.NewReader(image))
	if err != nil {
		return nil, fmt.Errorf("%w: not a cubin: %v", ErrBadModule, err)
	}
	syms, err := f.Symbols()
	if err != nil {
		return nil, fmt.Errorf("%w: cubin without a symbol table: %v", ErrBadModule, err)
	}
	var out []kernelEntry
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || elf.ST_BIND(s.Info) != elf.STB_GLOBAL || int(s.Section) >= len(f.Sections) {
			continue
		}
		if f.Sections[s.Section].Name == ".text."+s.Name {
			out = append(out, kernelEntry{name: s.Name})
		}
	}
	return out, nil
}
