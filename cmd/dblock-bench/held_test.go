package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
)

// The held-locks chart is well-formed SVG with a point per count and
// database, client CPU, server CPU where known, and heap; the check fails
// a count that lost a lock.
func TestHeldChartAndCheck(t *testing.T) {
	cfg := config{held: 200}
	row := func(db string, server float64, lost int) Row {
		h := &HeldStat{TTLSeconds: 30}
		for _, n := range heldCounts(cfg) {
			h.Points = append(h.Points, HeldPoint{Held: n, ClientCorePct: 0.5, HeapBytesPerLock: 700,
				StmtsPerSec: 1, RenewalsPerSec: float64(n) / 10, ServerCorePct: server, Lost: lost})
		}
		return Row{DB: db, Case: "held-locks", Held: h}
	}
	rows := []Row{row("postgres", 2, 0), row("mysql", -1, 0)}
	dec := xml.NewDecoder(strings.NewReader(heldSVG(rows)))
	circles := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the chart does not parse: %v", err)
		}
		if e, ok := tok.(xml.StartElement); ok && e.Name.Local == "circle" {
			circles++
		}
	}
	// postgres: client, server, heap; mysql: client, heap.
	if want := 5 * len(heldCounts(cfg)); circles != want {
		t.Errorf("%d points, want %d", circles, want)
	}
	for _, r := range rows {
		if err := checkHeld(cfg, &r); err != nil {
			t.Errorf("a good row failed the check: %v", err)
		}
	}
	lost := row("mysql", -1, 3)
	if err := checkHeld(cfg, &lost); err == nil || !strings.Contains(err.Error(), "3 of 20 lost") {
		t.Errorf("a row with losses: %v", err)
	}
	var b bytes.Buffer
	printRow(&b, rows[0].cells())
	if !strings.Contains(b.String(), "2000 held") {
		t.Errorf("table row %q lacks the largest count", b.String())
	}
}
