package main

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
)

// writeGrowthSVGs writes the soak and table-rows charts of the cases that
// ran.
func writeGrowthSVGs(cfg config, rows []Row) error {
	var soaks, trs []Row
	for _, r := range rows {
		if r.Soak != nil && len(r.Soak.Samples) > 0 {
			soaks = append(soaks, r)
		}
		if r.Rows != nil && len(r.Rows.Points) > 0 {
			trs = append(trs, r)
		}
	}
	if len(soaks) > 0 && cfg.soakSVGPath != "" {
		if err := writeFile(cfg.soakSVGPath, []byte(soakSVG(soaks))); err != nil {
			return err
		}
	}
	if len(trs) > 0 && cfg.rowsSVGPath != "" {
		return writeFile(cfg.rowsSVGPath, []byte(rowsSVG(trs)))
	}
	return nil
}

// soakSVG draws acquisitions/s and table + index size against minutes of
// churn, one colour per database.
func soakSVG(rows []Row) string {
	var rate, size []series
	for _, r := range rows {
		var a, s series
		a.label, s.label = r.DB, r.DB
		for _, p := range r.Soak.Samples {
			m := p.AtSeconds / 60
			a.xs, a.ys = append(a.xs, m), append(a.ys, p.OpsPerSec)
			s.xs, s.ys = append(s.xs, m), append(s.ys, float64(p.TableBytes)/1e6)
		}
		rate, size = append(rate, a), append(size, s)
	}
	return chartOf(fmt.Sprintf("dblock soak: TryLock+Unlock g=8 over %d keys, a contended key beside", rows[0].Soak.Keys),
		panelSpec{"acquisitions/s", "minutes", false, rate}, panelSpec{"table + indexes (MB)", "minutes", false, size})
}

// rowsSVG draws the cycle's p50 and p99 (dashed) against released rows
// in the table, one colour per database, on a log scale of rows.
func rowsSVG(rows []Row) string {
	var lat []series
	for _, r := range rows {
		var p50, p99 series
		p50.label, p99.label = r.DB+" p50", r.DB+" p99"
		p99.dashed = true
		for _, p := range r.Rows.Points {
			if p.Rows <= 0 {
				continue // no place on a log scale
			}
			x := float64(p.Rows)
			p50.xs, p50.ys = append(p50.xs, x), append(p50.ys, p.P50Micros/1000)
			p99.xs, p99.ys = append(p99.xs, x), append(p99.ys, p.P99Micros/1000)
		}
		lat = append(lat, p50, p99)
	}
	var rate []series
	for _, r := range rows {
		s := series{label: r.DB}
		for _, p := range r.Rows.Points {
			if p.Rows > 0 {
				s.xs, s.ys = append(s.xs, float64(p.Rows)), append(s.ys, p.OpsPerSec)
			}
		}
		rate = append(rate, s)
	}
	return chartOf("dblock: TryLock+Unlock g=1 against released rows in the table",
		panelSpec{"latency, ms (dashed: p99)", "released rows", true, lat}, panelSpec{"acquisitions/s", "released rows", true, rate})
}

// panelSpec is one panel of chartOf.
type panelSpec struct {
	title, xLabel string
	logX          bool
	ss            []series
}

// chartOf draws a titled chart of two panels side by side.
func chartOf(title string, left, right panelSpec) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", chartW, chartH)
	fmt.Fprintf(&b, `<text x="%d" y="24" text-anchor="middle" font-size="15" font-weight="bold">%s</text>`+"\n", chartW/2, html.EscapeString(title))
	xyPanel(&b, 40, left)
	xyPanel(&b, 40+panelW+40, right)
	b.WriteString("</svg>\n")
	return b.String()
}

// xyPanel draws p's lines at x0, y from 0, x linear or on a log scale;
// every point is a circle with a title (its value), one colour per
// database (the label's first word).
func xyPanel(b *strings.Builder, x0 int, p panelSpec) {
	fmt.Fprintf(b, `<text x="%d" y="50" text-anchor="middle" font-size="13">%s</text>`+"\n", x0+panelW/2, html.EscapeString(p.title))
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`+"\n", x0, plotBottom, x0+panelW, plotBottom)
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`+"\n", x0, plotTop, x0, plotBottom)
	lo, hi, top := math.Inf(1), math.Inf(-1), 0.0
	for _, s := range p.ss {
		for i := range s.xs {
			lo, hi, top = min(lo, s.xs[i]), max(hi, s.xs[i]), max(top, s.ys[i])
		}
	}
	if math.IsInf(lo, 0) {
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">no data</text>`+"\n", x0+panelW/2, (plotTop+plotBottom)/2)
		return
	}
	if !p.logX {
		lo = 0
	}
	top = niceCeil(top)
	px := func(x float64) float64 {
		if hi <= lo {
			return float64(x0) + panelW/2
		}
		if p.logX {
			return float64(x0) + 30 + (math.Log10(x)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))*(panelW-60)
		}
		return float64(x0) + 10 + (x-lo)/(hi-lo)*(panelW-20)
	}
	py := func(y float64) float64 { return plotBottom - y/top*float64(plotBottom-plotTop) }
	dbs := seriesDBs(p.ss)
	for _, s := range p.ss {
		colour := polyline(b, s, dbs, px, py)
		for i := range s.xs {
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"><title>%s, %s %s: %s</title></circle>`+"\n",
				px(s.xs[i]), py(s.ys[i]), colour, html.EscapeString(s.label), trimFloat(math.Round(s.xs[i]*100)/100), html.EscapeString(p.xLabel), trimFloat(math.Round(s.ys[i]*100)/100))
		}
	}
	// The x axis: its ends, and on a log scale each value measured.
	ticks := []float64{lo, hi}
	if p.logX {
		ticks = nil
		for _, s := range p.ss {
			for _, x := range s.xs {
				if slices.Index(ticks, x) < 0 {
					ticks = append(ticks, x)
				}
			}
		}
	}
	for _, x := range ticks {
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px(x), plotBottom+16, trimFloat(math.Round(x*10)/10))
	}
	panelFooter(b, x0, p.xLabel, top, dbs)
}
