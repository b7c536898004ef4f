package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// series is one line of a panel: a label and its points (x, y).
type series struct {
	label  string
	dashed bool
	xs, ys []float64
}

// writeHeldSVG writes the held-locks chart when the case ran.
func writeHeldSVG(cfg config, rows []Row) error {
	var held []Row
	for _, r := range rows {
		if r.Held != nil && len(r.Held.Points) > 0 {
			held = append(held, r)
		}
	}
	if len(held) == 0 || cfg.heldSVGPath == "" {
		return nil
	}
	return writeFile(cfg.heldSVGPath, []byte(heldSVG(held)))
}

// heldSVG draws CPU (client, and server where known) and heap per lock
// against the locks held, one colour per database, on a log scale of held
// locks.
func heldSVG(rows []Row) string {
	var cpu, heap []series
	ttl := 0.0
	for i, r := range rows {
		var c, s, h series
		c.label, s.label, h.label = r.DB+" client", r.DB+" server", r.DB
		s.dashed = true
		for _, p := range r.Held.Points {
			x := float64(p.Held)
			c.xs, c.ys = append(c.xs, x), append(c.ys, p.ClientCorePct)
			h.xs, h.ys = append(h.xs, x), append(h.ys, p.HeapBytesPerLock)
			if p.ServerCorePct >= 0 {
				s.xs, s.ys = append(s.xs, x), append(s.ys, p.ServerCorePct)
			}
		}
		cpu = append(cpu, c)
		if len(s.xs) > 0 {
			cpu = append(cpu, s)
		}
		heap = append(heap, h)
		ttl = rows[i].Held.TTLSeconds
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", chartW, chartH)
	fmt.Fprintf(&b, `<text x="%d" y="24" text-anchor="middle" font-size="15" font-weight="bold">dblock: one Locker holding many locks, TTL %gs</text>`+"\n", chartW/2, ttl)
	linePanel(&b, 40, "CPU, % of one core (dashed: server)", cpu)
	linePanel(&b, 40+panelW+40, "heap per held lock (bytes)", heap)
	b.WriteString("</svg>\n")
	return b.String()
}

// linePanel draws lines at x0: x is held locks on a log scale, y from 0;
// every point is a circle with a title (its value), one colour per
// database.
func linePanel(b *strings.Builder, x0 int, title string, ss []series) {
	fmt.Fprintf(b, `<text x="%d" y="50" text-anchor="middle" font-size="13">%s</text>`+"\n", x0+panelW/2, html.EscapeString(title))
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`+"\n", x0, plotBottom, x0+panelW, plotBottom)
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`+"\n", x0, plotTop, x0, plotBottom)
	lo, hi, top := math.Inf(1), math.Inf(-1), 0.0
	for _, s := range ss {
		for i := range s.xs {
			lo, hi, top = min(lo, s.xs[i]), max(hi, s.xs[i]), max(top, s.ys[i])
		}
	}
	if math.IsInf(lo, 0) {
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">no data</text>`+"\n", x0+panelW/2, (plotTop+plotBottom)/2)
		return
	}
	top = niceCeil(top)
	px := func(x float64) float64 {
		if hi <= lo {
			return float64(x0) + panelW/2
		}
		return float64(x0) + 30 + (math.Log10(x)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))*(panelW-60)
	}
	py := func(y float64) float64 { return plotBottom - y/top*float64(plotBottom-plotTop) }
	dbs := seriesDBs(ss)
	for _, s := range ss {
		colour := polyline(b, s, dbs, px, py)
		for i := range s.xs {
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s, %.0f held: %s</title></circle>`+"\n",
				px(s.xs[i]), py(s.ys[i]), colour, html.EscapeString(s.label), s.xs[i], trimFloat(math.Round(s.ys[i]*100)/100))
		}
	}
	// The x axis: each count measured.
	seen := map[float64]bool{}
	for _, s := range ss {
		for _, x := range s.xs {
			if !seen[x] {
				seen[x] = true
				fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px(x), plotBottom+16, trimFloat(x))
			}
		}
	}
	panelFooter(b, x0, "locks held", top, dbs)
}

// panelFooter draws a panel's x-axis label, the top of its y range and the
// legend of its databases' colours.
func panelFooter(b *strings.Builder, x0 int, xLabel string, top float64, dbs []string) {
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle" font-size="11">%s</text>`+"\n", x0+panelW/2, plotBottom+30, html.EscapeString(xLabel))
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="10" fill="#666">0–%s</text>`+"\n", x0+4, plotTop-4, trimFloat(top))
	for i, db := range dbs {
		x := x0 + i*90
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			x, plotBottom+38, palette[i%len(palette)], x+14, plotBottom+47, html.EscapeString(db))
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return 0
}

// seriesDBs returns the databases the series' labels start with, in order.
func seriesDBs(ss []series) []string {
	var dbs []string
	for _, s := range ss {
		dbs = appendNew(dbs, strings.Fields(s.label)[0])
	}
	return dbs
}

// polyline draws s as a line in its database's colour, dashed if s says
// so, and returns the colour.
func polyline(b *strings.Builder, s series, dbs []string, px, py func(float64) float64) string {
	colour := palette[indexOf(dbs, strings.Fields(s.label)[0])%len(palette)]
	var pts []string
	for i := range s.xs {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(s.xs[i]), py(s.ys[i])))
	}
	dash := ""
	if s.dashed {
		dash = ` stroke-dasharray="5,4"`
	}
	fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), colour, dash)
	return colour
}
