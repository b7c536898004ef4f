package dblock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// TestDeadlineSaidOnce: a call whose context's deadline has passed, or
// passes while it waits for a held key, fails with an error that wraps
// context.DeadlineExceeded and says "context deadline exceeded" once.
// Before, an acquire whose statement the driver ended for the deadline
// wrapped the driver's error (the deadline itself) under the deadline
// again: "dblock: acquire \"k\": context deadline exceeded: context
// deadline exceeded", and LockTx likewise.
func TestDeadlineSaidOnce(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		l, db, _ := dbtest.Locker(t, d)
		ctx := ctxT(t, 30*time.Second)
		other, err := dblock.New(db, dblock.WithTable(l.Table()))
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		held := mustLock(t)(other.TryLock(ctx, "held"))
		defer held.Unlock(ctx)
		n := 0
		calls := map[string]func(context.Context) error{
			"Lock":    func(c context.Context) error { _, err := l.Lock(c, "held"); return err },
			"LockAll": func(c context.Context) error { n++; _, err := l.LockAll(c, "free"+strconv.Itoa(n), "held"); return err },
			"LockTx": func(c context.Context) error {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				_, err = l.LockTx(c, tx, "held")
				return err
			},
		}
		// TryLock of a free key fails only when the deadline has passed.
		calls["TryLock"] = func(c context.Context) error {
			if _, ok := c.Deadline(); ok && c.Err() == nil {
				return context.DeadlineExceeded // not tried: it may succeed
			}
			n++
			_, err := l.TryLock(c, "free"+strconv.Itoa(n))
			return err
		}
		for name, call := range calls {
			// A deadline already past, and ones that pass while the call
			// waits for the held key or runs a statement.
			for _, after := range []time.Duration{-time.Second, time.Millisecond, 20 * time.Millisecond} {
				cctx, cancel := context.WithTimeout(ctx, after)
				err := call(cctx)
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("%s with a deadline %v away = %v, want context.DeadlineExceeded", name, after, err)
					continue
				}
				if n := strings.Count(err.Error(), "deadline exceeded"); n != 1 {
					t.Errorf("%s with a deadline %v away: %q says \"deadline exceeded\" %d times, want once", name, after, err, n)
				}
				if n := strings.Count(err.Error(), "dblock: "); err != context.DeadlineExceeded && n != 1 {
					t.Errorf("%s with a deadline %v away: %q says \"dblock: \" %d times, want once", name, after, err, n)
				}
			}
		}
	})
}
