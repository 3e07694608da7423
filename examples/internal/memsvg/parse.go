package memsvg

import (
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
)

// DrawnRegion is a region as an SVG file draws it, read back by Parse.
type DrawnRegion struct {
	Bar   string // the bar's id
	Name  string
	Bytes int64
	// X and Width are the rect's, in the bar's viewBox units (BarWidth
	// wide).
	X, Width float64
}

// DrawnBar is a bar as an SVG file draws it: its data-total and
// data-scale, its regions in order.
type DrawnBar struct {
	ID           string
	Total, Scale int64
	Regions      []DrawnRegion
}

// Parse reads the bars a standalone file (WriteDocument) or a page
// holding Inline bars draws, as an SVG reader sees them: every
// <svg class="bar"> element and its <rect class="region"> children.
// Errors: r's, the XML's, or a data attribute that is not a number.
func Parse(r io.Reader) ([]DrawnBar, error) {
	dec := xml.NewDecoder(r)
	dec.Strict = false
	var bars []DrawnBar
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return bars, nil
		}
		if err != nil {
			return nil, err
		}
		el, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		a := attrs(el)
		switch {
		case el.Name.Local == "svg" && a["class"] == "bar":
			b := DrawnBar{ID: a["id"]}
			if b.Total, err = strconv.ParseInt(a["data-total"], 10, 64); err != nil {
				return nil, fmt.Errorf("memsvg: bar %q: data-total: %w", b.ID, err)
			}
			if b.Scale, err = strconv.ParseInt(a["data-scale"], 10, 64); err != nil {
				return nil, fmt.Errorf("memsvg: bar %q: data-scale: %w", b.ID, err)
			}
			bars = append(bars, b)
		case el.Name.Local == "rect" && a["class"] == "region" && len(bars) > 0:
			b := &bars[len(bars)-1]
			d := DrawnRegion{Bar: b.ID, Name: a["data-region"]}
			var errs [3]error
			d.Bytes, errs[0] = strconv.ParseInt(a["data-bytes"], 10, 64)
			d.X, errs[1] = strconv.ParseFloat(a["x"], 64)
			d.Width, errs[2] = strconv.ParseFloat(a["width"], 64)
			for _, e := range errs {
				if e != nil {
					return nil, fmt.Errorf("memsvg: bar %q region %q: %w", b.ID, d.Name, e)
				}
			}
			b.Regions = append(b.Regions, d)
		}
	}
}

// attrs is el's attributes by local name (data-* keep their prefix).
func attrs(el xml.StartElement) map[string]string {
	m := make(map[string]string, len(el.Attr))
	for _, a := range el.Attr {
		m[a.Name.Local] = a.Value
	}
	return m
}
