package memsvg

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"html/template"
	"io"

	"github.com/gpuarena/gpuarena/arena"
)

// Layout of a standalone file, in SVG user units.
const (
	margin     = 20
	captionH   = 22 // the caption's line above a bar
	legendLine = 18 // one legend line below a bar
	barGap     = 24 // between one bar's legend and the next caption
)

// placedBar is a bar at its place in a standalone file; an inline bar has
// Placed false and fills its container's width.
type placedBar struct {
	Bar
	Placed   bool
	Y        int // the bar's top
	CaptionY int
	Legend   []legendRow
}

// legendRow is one region's line in a standalone file's legend.
type legendRow struct {
	Region
	Y   int
	Pct string // of the bar's Total
}

// document is a standalone file.
type document struct {
	Title         string
	Width, Height int
	Bars          []placedBar
}

var tmpl = template.Must(template.New("memsvg").Funcs(template.FuncMap{
	"human": arena.HumanBytes,
	"add":   func(a, b int) int { return a + b },
}).Parse(`
{{- define "bar" -}}
<svg class="bar" id="{{.ID}}"{{if .Placed}} x="` + fmt.Sprint(margin) + `" y="{{.Y}}" width="` + fmt.Sprint(BarWidth) + `" height="` + fmt.Sprint(BarHeight) + `"{{end}} viewBox="0 0 ` + fmt.Sprint(BarWidth) + ` ` + fmt.Sprint(BarHeight) + `" preserveAspectRatio="none" data-total="{{.Total}}" data-scale="{{.Scale}}">
{{- range .Regions}}{{if gt .Bytes 0}}
<rect class="region" data-region="{{.Name}}" data-bytes="{{.Bytes}}" x="{{.X}}" y="0" width="{{.Width}}" height="` + fmt.Sprint(BarHeight) + `" fill="{{.Color}}"><title>{{.Title}}: {{human .Bytes}} ({{.Bytes}} B)</title></rect>
{{- end}}{{end}}
{{- range .Markers}}
<line class="marker" data-bytes="{{.Bytes}}" x1="{{.X}}" x2="{{.X}}" y1="0" y2="` + fmt.Sprint(BarHeight) + `" stroke="#222" stroke-width="2" stroke-dasharray="6 4"><title>{{.Title}}</title></line>
{{- end}}
</svg>
{{- end -}}
{{- define "document" -}}
<svg xmlns="http://www.w3.org/2000/svg" width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}" font-family="system-ui, sans-serif" font-size="13">
<title>{{.Title}}</title>
<rect width="100%" height="100%" fill="#fff"/>
{{- range .Bars}}
<text x="` + fmt.Sprint(margin) + `" y="{{.CaptionY}}" font-size="15" fill="#222">{{.Caption}}</text>
{{template "bar" .}}
<rect x="` + fmt.Sprint(margin) + `" y="{{.Y}}" width="` + fmt.Sprint(BarWidth) + `" height="` + fmt.Sprint(BarHeight) + `" fill="none" stroke="#bbb"/>
{{- range .Legend}}
<g class="legend" data-legend="{{.Name}}"><rect x="` + fmt.Sprint(margin) + `" y="{{.Y}}" width="12" height="12" fill="{{.Color}}"/><text x="` + fmt.Sprint(margin+18) + `" y="{{add .Y 11}}" fill="#222">{{.Title}}: {{human .Bytes}} ({{.Bytes}} B, {{.Pct}})</text></g>
{{- end}}
{{- end}}
</svg>
{{end -}}
`))

// Inline returns bar b as an <svg> element for an HTML page: it fills its
// container's width (style it with CSS, class "bar"), each region a
// <rect class="region"> with data-region and data-bytes, its exact bytes
// in its tooltip. Errors: the template's (none for a bar NewBar made).
func Inline(b Bar) (template.HTML, error) {
	var buf bytes.Buffer
	if err := tmpl.ExecuteTemplate(&buf, "bar", placedBar{Bar: b}); err != nil {
		return "", fmt.Errorf("memsvg: bar %q: %w", b.ID, err)
	}
	return template.HTML(buf.String()), nil // html/template escaped every value
}

// WriteDocument writes a standalone SVG file titled title: each bar under
// its caption, BarWidth units wide, with a legend line per region that
// holds memory (its
// title, human and exact bytes, share of the bar's Total) beneath it.
// Errors: w's.
func WriteDocument(w io.Writer, title string, bars ...Bar) error {
	d := document{Title: title, Width: BarWidth + 2*margin}
	y := margin
	for _, b := range bars {
		p := placedBar{Bar: b, Placed: true, CaptionY: y + 15, Y: y + captionH}
		ly := p.Y + BarHeight + 8
		for _, r := range b.Regions {
			if r.Bytes > 0 {
				p.Legend = append(p.Legend, legendRow{Region: r, Y: ly, Pct: fmt.Sprintf("%.2f%%", 100*float64(r.Bytes)/float64(max(b.Total, 1)))})
				ly += legendLine
			}
		}
		d.Bars = append(d.Bars, p)
		y = ly + barGap
	}
	d.Height = y - barGap + margin
	// The declaration is written here: html/template escapes "<?" in a
	// template's text.
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	return tmpl.ExecuteTemplate(w, "document", d)
}
