package main

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
)

// Chart geometry, in SVG user units.
const (
	chartW, chartH = 760, 340
	panelW         = 340
	plotTop        = 70
	plotBottom     = 280
)

var palette = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759"}

// bar is one bar of a panel: its group (database), series and value.
type bar struct {
	group, series string
	value         float64
	label         string
}

// chartSVG draws the contended case per database: handoffs/s on the left,
// p50 and p99 handoff latency (ms) on the right; the case's first row per
// database (it is measured again beside contended-fifo, which is in the
// table only).
func chartSVG(rows []Row) string {
	var rate, lat []bar
	drawn := map[string]bool{}
	for _, r := range rows {
		if r.Contended == nil || r.Case != "contended" || drawn[r.DB] {
			continue
		}
		drawn[r.DB] = true
		rate = append(rate, bar{r.DB, "handoffs/s", r.OpsPerSec, fmt.Sprintf("%.0f", r.OpsPerSec)})
		lat = append(lat,
			bar{r.DB, "p50", r.P50Micros / 1000, fmt.Sprintf("%.2f", r.P50Micros/1000)},
			bar{r.DB, "p99", r.P99Micros / 1000, fmt.Sprintf("%.2f", r.P99Micros/1000)})
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", chartW, chartH)
	fmt.Fprintf(&b, `<text x="%d" y="24" text-anchor="middle" font-size="15" font-weight="bold">dblock, contended: 8 goroutines on one key, 2 Lockers, blocking Lock</text>`+"\n", chartW/2)
	panel(&b, 30, "handoffs per second", rate)
	panel(&b, 30+panelW+40, "handoff latency (ms), release → next acquisition", lat)
	b.WriteString("</svg>\n")
	return b.String()
}

// panel draws one bar chart at x0: bars grouped by database, one colour per
// series, each labelled with its value.
func panel(b *strings.Builder, x0 int, title string, bars []bar) {
	fmt.Fprintf(b, `<text x="%d" y="50" text-anchor="middle" font-size="13">%s</text>`+"\n", x0+panelW/2, html.EscapeString(title))
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`+"\n", x0, plotBottom, x0+panelW, plotBottom)
	if len(bars) == 0 {
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">no data</text>`+"\n", x0+panelW/2, (plotTop+plotBottom)/2)
		return
	}
	var groups, series []string
	top := 0.0
	for _, br := range bars {
		groups = appendNew(groups, br.group)
		series = appendNew(series, br.series)
		top = max(top, br.value)
	}
	top = niceCeil(top)
	groupW := float64(panelW) / float64(len(groups))
	barW := groupW * 0.7 / float64(len(series))
	for _, br := range bars {
		gi, si := slices.Index(groups, br.group), slices.Index(series, br.series)
		h := 0.0
		if top > 0 {
			h = br.value / top * float64(plotBottom-plotTop)
		}
		x := float64(x0) + float64(gi)*groupW + groupW*0.15 + float64(si)*barW
		y := float64(plotBottom) - h
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %s</title></rect>`+"\n",
			x, y, barW-2, h, palette[si%len(palette)], html.EscapeString(br.group), html.EscapeString(br.series), html.EscapeString(br.label))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x+barW/2-1, y-4, html.EscapeString(br.label))
	}
	for gi, g := range groups {
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle" font-weight="bold">%s</text>`+"\n",
			float64(x0)+(float64(gi)+0.5)*groupW, plotBottom+18, html.EscapeString(g))
	}
	if len(series) > 1 {
		for si, s := range series {
			x := x0 + si*80
			fmt.Fprintf(b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
				x, plotBottom+32, palette[si%len(palette)], x+14, plotBottom+41, html.EscapeString(s))
		}
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end" font-size="10" fill="#666">bar height: 0–%s</text>`+"\n", x0+panelW, plotBottom+41, trimFloat(top))
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string { return strings.TrimSuffix(fmt.Sprintf("%g", v), ".0") }

func appendNew(s []string, v string) []string {
	if !slices.Contains(s, v) {
		return append(s, v)
	}
	return s
}
