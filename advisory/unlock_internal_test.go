package advisory

import (
	"testing"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// TestSessionUnlockCount: a session's unlock says 1 when it released a
// hold and 0 when the session held none, in every mode, whichever form
// the dialect runs (an exec whose row count answers on PostgreSQL, a
// query elsewhere).
func TestSessionUnlockCount(t *testing.T) {
	for _, d := range []dblock.Dialect{dblock.Postgres, dblock.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			ctx := t.Context()
			l, err := New(dbtest.Open(t, d))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			s, err := l.openSession(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer l.kill(s)
			for _, m := range []mode{exclusive, shared} {
				if l.d.check(m) != nil {
					continue
				}
				arg := l.d.arg("unlock-count-" + m.String())
				if v, err := s.queryInt(ctx, l.d.trySQL(m), arg); err != nil || v != 1 {
					t.Fatalf("%s: try: %d, %v", m, v, err)
				}
				if v, err := s.unlock(ctx, l.d, m, arg); err != nil || v != 1 {
					t.Fatalf("%s: unlock of a hold: %d, %v; want 1", m, v, err)
				}
				if v, err := s.unlock(ctx, l.d, m, arg); err != nil || v != 0 {
					t.Fatalf("%s: unlock of no hold: %d, %v; want 0", m, v, err)
				}
			}
		})
	}
}
