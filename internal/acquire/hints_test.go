package acquire

import (
	"strconv"
	"testing"
)

// rowHints stays within its bound and keeps the newest key.
func TestHintsBound(t *testing.T) {
	h := newHints()
	for i := range 3 * maxRowHints {
		key := "k" + strconv.Itoa(i)
		h.add(key)
		if !h.has(key) {
			t.Fatalf("%s: not remembered right after add", key)
		}
		if n := len(h.m); n > maxRowHints {
			t.Fatalf("%d hints, bound %d", n, maxRowHints)
		}
	}
	if h.has("never") {
		t.Fatal("a key never added is remembered")
	}
}
