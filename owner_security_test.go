package dblock_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// ownerRE is a generated owner memo: host:pid: and 128 bits in hex.
var ownerRE = regexp.MustCompile(`^.+:[0-9]+:([0-9a-f]{32,})$`)

// Generated owners are distinct and end in at least 32 hex digits (128
// bits) from crypto/rand, across acquisitions and Lockers.
func TestOwnersAreUnguessable(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		l, _, table := dbtest.Locker(t, d)
		other, _ := newLocker(t, d, table)
		ctx := ctxT(t, 30*time.Second)
		seen := map[string]bool{}
		suffixes := map[string]bool{}
		for i := range 40 {
			locker := l
			if i%2 == 1 {
				locker = other
			}
			lk := mustLock(t)(locker.TryLock(ctx, "k"))
			m := ownerRE.FindStringSubmatch(lk.Owner())
			if m == nil {
				t.Fatalf("owner %q is not host:pid:<32+ hex digits>", lk.Owner())
			}
			if seen[lk.Owner()] || suffixes[m[1]] {
				t.Fatalf("owner %q drawn twice", lk.Owner())
			}
			seen[lk.Owner()], suffixes[m[1]] = true, true
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// Only the exact memo gives access to a held lock: a forged *Lock cannot
// release anything, a memo that differs in any byte (case, space, prefix,
// the host:pid part with a wrong random part) gets ErrLocked, and the row
// stays the holder's. The exact memo re-enters and its Unlock takes off only
// its own level.
func TestOnlyTheMemoUnlocks(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		l, db, table := dbtest.Locker(t, d)
		attacker, _ := newLocker(t, d, table)
		ctx := ctxT(t, 30*time.Second)
		holder := mustLock(t)(l.TryLock(ctx, "k"))
		want := func(depth int) {
			t.Helper()
			r, ok := readRow(t, db, d, table, "k")
			if !ok || r.memo != holder.Owner() || r.depth != depth || r.token != holder.Token() {
				t.Fatalf("row = %+v (present %v), want %q at depth %d, token %d", r, ok, holder.Owner(), depth, holder.Token())
			}
		}
		if err := new(dblock.Lock).Unlock(ctx); !errors.Is(err, dblock.ErrNotHeld) {
			t.Errorf("Unlock of a zero Lock = %v, want ErrNotHeld", err)
		}
		m := ownerRE.FindStringSubmatch(holder.Owner())
		if m == nil {
			t.Fatalf("owner %q", holder.Owner())
		}
		prefix := strings.TrimSuffix(holder.Owner(), m[1])
		for _, memo := range []string{
			prefix + strings.Repeat("0", len(m[1])),
			prefix + strings.ToUpper(m[1]),
			holder.Owner()[:len(holder.Owner())-1],
			holder.Owner() + " ",
			" " + holder.Owner(),
			holder.Owner() + "0",
			prefix,
		} {
			lk, err := attacker.TryLock(ctx, "k", dblock.Owner(memo))
			if !errors.Is(err, dblock.ErrLocked) {
				t.Fatalf("TryLock with memo %q = %v, %v; want ErrLocked", memo, lk, err)
			}
		}
		want(1)
		again := mustLock(t)(attacker.TryLock(ctx, "k", dblock.Owner(holder.Owner())))
		if again.Token() != holder.Token() {
			t.Errorf("re-entry token %d, want %d", again.Token(), holder.Token())
		}
		want(2)
		if err := again.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		want(1)
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
