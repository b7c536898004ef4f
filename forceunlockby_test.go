package dblock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// TestForceUnlockBy: the history's detail names both this process and the
// one it acts for; a bad by is refused before anything is released.
func TestForceUnlockBy(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		table, on := historyTable(t, d)
		l, _ := newLocker(t, d, table)
		ctx := ctxT(t, 30*time.Second)
		lk := mustLock(t)(l.Lock(ctx, "k", dblock.Owner("alice")))
		for _, bad := range []string{"", "two\nlines", strings.Repeat("x", dblock.MaxForceUnlockBy+1), "\xff"} {
			if _, err := l.ForceUnlockBy(ctx, "k", bad); !errors.Is(err, dblock.ErrInvalidOption) {
				t.Errorf("ForceUnlockBy(by %q) = %v, want ErrInvalidOption", bad, err)
			}
		}
		if _, err := l.Get(ctx, "k"); err != nil {
			t.Fatalf("a refused ForceUnlockBy released the key: %v", err)
		}
		info, err := l.ForceUnlockBy(ctx, "k", "ui, from 127.0.0.1:5000")
		if err != nil || info.Owner != "alice" || info.Token != lk.Token() {
			t.Fatalf("ForceUnlockBy = %+v, %v; want alice's lock", info, err)
		}
		<-lk.Done()
		if _, err := l.ForceUnlockBy(ctx, "k", "ui"); !errors.Is(err, dblock.ErrNotHeld) {
			t.Errorf("ForceUnlockBy of a free key = %v, want ErrNotHeld", err)
		}
		if !on {
			return
		}
		got := events(t, l, "k")
		if len(got) != 2 || !strings.HasPrefix(got[1], "force-unlocked ") || !strings.HasSuffix(got[1], ", for ui, from 127.0.0.1:5000") ||
			!strings.Contains(got[1], " pid ") {
			t.Fatalf("history %q: want force-unlocked by this process, for ui, from 127.0.0.1:5000", got)
		}
	})
}
