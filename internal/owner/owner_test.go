package owner

import (
	"strings"
	"testing"
)

// Generated owners stay distinct across refills of the random buffer, and
// each carries 32 hex digits after the process prefix.
func TestNewOwnerAcrossRefills(t *testing.T) {
	const n = 3 * len(ownerBits.buf) / 16
	seen := make(map[string]bool, n)
	for range n {
		o := New()
		suffix, ok := strings.CutPrefix(o, Prefix)
		if !ok || len(suffix) != 32 || strings.Trim(suffix, "0123456789abcdef") != "" {
			t.Fatalf("owner %q is not %s and 32 hex digits", o, Prefix)
		}
		if seen[suffix] {
			t.Fatalf("owner %q drawn twice", o)
		}
		seen[suffix] = true
	}
}
