package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gpuarena/gpuarena/arena"
)

// numberArray matches an indented JSON array of integers. JSON strings
// cannot hold a raw newline, so it only ever matches structure.
var numberArray = regexp.MustCompile(`\[\s*(-?\d+(?:,\s*-?\d+)*)\s*\]`)

// writeJSON writes v as indented JSON and a newline, with arrays of integers
// (shapes) kept on one line: "shape": [8192, 2048].
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	b = numberArray.ReplaceAllFunc(b, func(m []byte) []byte {
		return []byte("[" + strings.Join(strings.Fields(strings.ReplaceAll(string(m[1:len(m)-1]), ",", " ")), ", ") + "]")
	})
	_, err = w.Write(append(b, '\n'))
	return err
}

// table aligns rows into columns with text/tabwriter and trims the padding
// the last column would leave at the end of a line.
type table struct {
	out io.Writer
	buf bytes.Buffer
	tw  *tabwriter.Writer
}

// newTable returns a table writing to w; call Flush when done.
func newTable(w io.Writer) *table {
	t := &table{out: w}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 0, 2, ' ', 0)
	return t
}

// Write implements io.Writer: tab-separated cells, newline-terminated rows.
func (t *table) Write(p []byte) (int, error) { return t.tw.Write(p) }

// Flush writes the aligned rows to the underlying writer.
func (t *table) Flush() error {
	if err := t.tw.Flush(); err != nil {
		return err
	}
	var out strings.Builder
	for line := range strings.Lines(t.buf.String()) {
		out.WriteString(strings.TrimRight(line, " \n"))
		out.WriteByte('\n')
	}
	t.buf.Reset()
	_, err := io.WriteString(t.out, out.String())
	return err
}

// row writes cells tab-separated as one table row.
func row(w io.Writer, cells ...any) {
	s := make([]string, len(cells))
	for i, c := range cells {
		s[i] = fmt.Sprint(c)
	}
	fmt.Fprintln(w, strings.Join(s, "\t"))
}

// shapeString formats a shape as "[8192, 2048]".
func shapeString(dims []int64) string {
	s := make([]string, len(dims))
	for i, d := range dims {
		s[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// human is arena.HumanBytes, the one size format of the text outputs.
func human(n int64) string { return arena.HumanBytes(n) }

// bytesAndHuman formats n as "33554432 B (32.00 MiB)".
func bytesAndHuman(n int64) string {
	if n < 1024 && n > -1024 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%d B (%s)", n, human(n))
}

// paramCount formats a parameter count n ≥ 0 for reading: billions with two
// decimals from 999.95 million on ("8.03B"), millions with one from a
// million on ("1.2M"), else the whole count with thousands separated
// ("5,120"), so a tiny test model does not read as "0.00B".
func paramCount(n int64) string {
	switch {
	case n >= 999_950_000:
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	case n >= 1_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	}
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// writeNotes writes notes as an indented list under a "notes:" heading.
func writeNotes(w io.Writer, notes []string) {
	if len(notes) == 0 {
		return
	}
	fmt.Fprintln(w, "notes:")
	for _, n := range notes {
		fmt.Fprintf(w, "  - %s\n", n)
	}
}

// nonNil returns s, or an empty slice for nil, so JSON shows [] not null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// writeJSONFile writes v as indented JSON to the file at path, replacing it.
func writeJSONFile(path string, v any) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeJSON(f, v); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
