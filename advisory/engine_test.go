package advisory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// TestDistributedEngineRefused: on a distributed engine (TiDB, when
// DBLOCK_MYSQL_DSN points at one) every lock is refused with an error
// wrapping errors.ErrUnsupported, since its advisory locks are not what
// they are on one server; elsewhere the same calls lock.
func TestDistributedEngineRefused(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		l, db := newLocker(t, d)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		lk, err := l.TryLock(ctx, randomKey("engine"))
		if dbtest.Engine(t, db, d).Distributed() {
			if !errors.Is(err, errors.ErrUnsupported) {
				t.Fatalf("TryLock on a distributed engine = %v, want errors.ErrUnsupported", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("TryLock = %v", err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
