package advisory_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// TestGaleraRefused: on a MariaDB Galera node (wsrep_on = ON) every lock
// is refused with an error wrapping errors.ErrUnsupported: GET_LOCK's names
// are one node's, so two nodes would grant the same key, and MariaDB
// refuses GET_LOCK under Galera since MDEV-30473 (1235).
func TestGaleraRefused(t *testing.T) {
	dsns := dbtest.GaleraDSNs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, dsn := range dsns {
		l := lockerOn(t, dbtest.OpenMySQL(t, dsn))
		lk, err := l.TryLock(ctx, randomKey("galera"))
		if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(fmt.Sprint(err), "galera") {
			t.Errorf("TryLock on the Galera node %s = %v, %v; want an error naming galera, wrapping errors.ErrUnsupported", dsn, lk, err)
		}
		if lk != nil {
			_ = lk.Unlock(ctx)
		}
	}
}
