package main

import (
	"fmt"
	"html"
	"strings"
)

// hbar is one bar of a horizontal bar chart.
type hbar struct {
	label string
	value float64
	text  string
	ours  bool // dblock's: drawn in its own colour
}

// hpanel is one chart of the figure.
type hpanel struct {
	title string
	bars  []hbar
}

// figureSVG draws panels one under the other, each a horizontal bar chart
// scaled to its largest bar.
func figureSVG(title string, panels []hpanel) string {
	const (
		width, labelW, barMax, rowH, gap = 760, 250, 420, 18, 40
	)
	height := 40
	for _, p := range panels {
		height += gap + rowH*len(p.bars)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="22" text-anchor="middle" font-size="14" font-weight="bold">%s</text>`+"\n", width/2, html.EscapeString(title))
	y := 40
	for _, p := range panels {
		y += gap
		fmt.Fprintf(&b, `<text x="10" y="%d" font-size="13" font-weight="bold">%s</text>`+"\n", y-8, html.EscapeString(p.title))
		top := 0.0
		for _, br := range p.bars {
			top = max(top, br.value)
		}
		for i, br := range p.bars {
			yy := y + i*rowH
			w := 0.0
			if top > 0 {
				w = br.value / top * barMax
			}
			colour := "#9aa5b1"
			if br.ours {
				colour = "#4e79a7"
			}
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelW-6, yy+13, html.EscapeString(br.label))
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", labelW, yy+2, w, rowH-4, colour)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s</text>`+"\n", float64(labelW)+w+4, yy+13, html.EscapeString(br.text))
		}
		y += rowH * len(p.bars)
	}
	b.WriteString("</svg>\n")
	return b.String()
}
