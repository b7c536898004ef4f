package dialect

import (
	"fmt"
	"strings"
	"testing"
)

// A batch is padded with nil calls to the next of batchSizes, by less than
// half its calls, and their arguments are NULLs: nine statement texts
// per kind, whatever the batch's size, and each text's placeholders all
// bound.
func TestPadded(t *testing.T) {
	sizes := map[int]bool{}
	for n := 2; n <= MaxBatch; n++ {
		cs := make([]*Call, n)
		for i := range cs {
			cs[i] = &Call{Key: fmt.Sprint("k", i), Owner: "o", Token: int64(i)}
		}
		pc := Padded(cs)
		sizes[len(pc)] = true
		if len(pc) < n || 2*(len(pc)-n) >= n {
			t.Fatalf("%d calls padded to %d", n, len(pc))
		}
		for i, c := range pc {
			if (i < n) != (c != nil) || i < n && c != cs[i] {
				t.Fatalf("%d calls: entry %d is %v", n, i, c)
			}
		}
		args := AppendArgs(AppendArgs(nil, pc, func(c *Call) []any { return []any{c.Key} }), pc, RefArgs)
		if len(args) != 4*len(pc) {
			t.Fatalf("%d calls: %d arguments, want %d", n, len(args), 4*len(pc))
		}
		for i, a := range args {
			pad := i >= n && i < len(pc) || i >= len(pc)+3*n
			if (a == nil) != pad {
				t.Fatalf("%d calls: argument %d is %v", n, i, a)
			}
		}
		if q := Placeholders("?", len(pc)) + " " + Placeholders("(?, ?, ?)", len(pc)); strings.Count(q, "?") != len(args) {
			t.Fatalf("%d calls: %d placeholders for %d arguments", n, strings.Count(q, "?"), len(args))
		}
	}
	if len(sizes) != len(batchSizes) {
		t.Errorf("batch sizes %v, want %v", sizes, batchSizes)
	}
	// The caller's slice is left as it was, spare capacity included.
	cs := make([]*Call, 5, 8)
	for i := range cs {
		cs[i] = &Call{}
	}
	sentinel := &Call{Key: "sentinel"}
	cs[:6][5] = sentinel
	if pc := Padded(cs); len(pc) != 6 || pc[5] != nil {
		t.Fatalf("padded to %d calls, padding %v; want 6, nil", len(pc), pc[5:])
	}
	if cs[:6][5] != sentinel {
		t.Error("padded wrote into the spare capacity of its argument")
	}
}

// A list of up to MaxList numbers goes in one statement: its own size up
// to MaxBatch, then a power of two at most twice its size, so that five
// texts beyond MaxBatch serve every list; each wide text has as many
// placeholders as its width.
func TestListWidth(t *testing.T) {
	s := ListSQL("DELETE FROM t WHERE id IN ({list})", func(i int) string { return fmt.Sprintf("$%d", i) })
	widths := map[int]bool{}
	for n := 1; n <= MaxList; n++ {
		w := ListWidth(n)
		if w < n || n <= MaxBatch && w != n || n > MaxBatch && (w >= 2*n || w&(w-1) != 0) {
			t.Fatalf("ListWidth(%d) = %d", n, w)
		}
		widths[w] = true
		if got := strings.Count(s.Text(w), "$"); got != w {
			t.Fatalf("the text for %d numbers has %d placeholders", w, got)
		}
	}
	if len(widths) != MaxBatch+4 {
		t.Errorf("%d texts for lists up to %d numbers, want %d", len(widths), MaxList, MaxBatch+4)
	}
}
