package dblockpgx_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/dblockpgx"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A key taken through the pool is the row a database/sql Locker (and the
// dblock command, which reads through List and Get) sees: same owner,
// token and lease, refused to the other Locker until released.
func TestLockerSharesRows(t *testing.T) {
	e := setup(t)
	lk, err := e.pl.TryLock(e.ctx, "k", dblock.Data([]byte("from pgx")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.sl.TryLock(e.ctx, "k"); !errors.Is(err, dblock.ErrLocked) {
		t.Fatalf("database/sql TryLock of a key held through pgx: %v, want ErrLocked", err)
	}
	info, err := e.sl.Get(e.ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if info.Owner != lk.Owner() || info.Token != lk.Token() || info.Depth != 1 || string(info.Data()) != "from pgx" {
		t.Fatalf("database/sql Get = %+v; want owner %q token %d depth 1 data %q", info, lk.Owner(), lk.Token(), "from pgx")
	}
	list, err := e.sl.List(e.ctx)
	if err != nil || len(list) != 1 || list[0].Key != "k" || list[0].Token != lk.Token() {
		t.Fatalf("database/sql List = %+v, %v; want k under token %d", list, err, lk.Token())
	}
	if err := lk.Unlock(e.ctx); err != nil {
		t.Fatal(err)
	}
	taken, err := e.sl.TryLock(e.ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if taken.Token() <= lk.Token() {
		t.Fatalf("database/sql token %d not above pgx token %d", taken.Token(), lk.Token())
	}
	if _, err := e.pl.TryLock(e.ctx, "k"); !errors.Is(err, dblock.ErrLocked) {
		t.Fatalf("pgx TryLock of a key held through database/sql: %v, want ErrLocked", err)
	}
	if err := taken.Unlock(e.ctx); err != nil {
		t.Fatal(err)
	}
}

// Goroutines of both Lockers contend for one key: one holder at a time,
// tokens increasing.
func TestLockersContend(t *testing.T) {
	e := setup(t, dblock.WithRetry(time.Millisecond, 10*time.Millisecond))
	const workers, rounds = 4, 10
	var inside, counter atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		l := e.pl
		if w%2 == 1 {
			l = e.sl
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if err := l.Do(e.ctx, "k", func(ctx context.Context) error {
					if inside.Add(1) != 1 {
						return errors.New("two holders at once")
					}
					defer inside.Add(-1)
					v := counter.Load()
					runtime.Gosched()
					counter.Store(v + 1)
					return nil
				}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := counter.Load(); got != workers*rounds {
		t.Fatalf("counter = %d, want %d: lost updates", got, workers*rounds)
	}
}

// Close gives the pool back every connection the Locker kept, and leaves
// the pool open.
func TestCloseReturnsConnections(t *testing.T) {
	e := setup(t)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				lk, err := e.pl.TryLock(e.ctx, "k"+string(rune('a'+w)))
				if err == nil {
					err = lk.Unlock(e.ctx)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := e.pool.Stat().AcquiredConns(); n == 0 {
		t.Fatalf("no connection kept between statements: the test shows nothing")
	}
	if err := e.pl.Close(); err != nil {
		t.Fatal(err)
	}
	if n := e.pool.Stat().AcquiredConns(); n != 0 {
		t.Fatalf("%d of the pool's connections still out after Close", n)
	}
	if err := e.pool.Ping(e.ctx); err != nil {
		t.Fatalf("pool unusable after the Locker closed: %v", err)
	}
}

// A Locker on a pgx pool hears other Lockers' releases through LISTEN on a
// connection of its own, made with the pool's configuration.
func TestLockerListens(t *testing.T) {
	e := setup(t)
	const app = "dblockpgx-listen-test"
	pool := newPool(t, func(c *pgxpool.Config) { c.ConnConfig.RuntimeParams["application_name"] = app })
	l, err := dblockpgx.New(pool, dblock.WithTable(e.table))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	held, err := e.sl.TryLock(e.ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		lk, err := l.Lock(e.ctx, "k")
		if err == nil {
			err = lk.Unlock(e.ctx)
		}
		got <- err
	}()
	eventually(t, 10*time.Second, 5*time.Millisecond, "the pgx Locker's LISTEN", func() bool {
		var n int
		if err := e.db.QueryRowContext(e.ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND query = $2`,
			app, `LISTEN "dblock_`+e.table+`"`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	if err := held.Unlock(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

func TestMigrate(t *testing.T) {
	ctx := testCtx(t)
	db := dbtest.Open(t, dblock.Postgres)
	table := dbtest.TableName()
	dbtest.Drop(t, db, dblock.Postgres, table)
	pool := newPool(t, nil)
	for range 2 { // the second finds every version applied
		if err := dblockpgx.Migrate(ctx, pool, dblock.WithTable(table)); err != nil {
			t.Fatal(err)
		}
	}
	var version int64
	if err := db.QueryRowContext(ctx, `SELECT max(version) FROM "`+table+`_version"`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != dblock.SchemaVersion() {
		t.Fatalf("schema version %d, want %d", version, dblock.SchemaVersion())
	}
	if n := pool.Stat().AcquiredConns(); n != 0 {
		t.Fatalf("%d of the pool's connections still out after Migrate", n)
	}
}

func TestBadInput(t *testing.T) {
	e := setup(t)
	if _, err := dblockpgx.New(nil); !errors.Is(err, dblock.ErrInvalidOption) {
		t.Fatalf("New(nil): %v", err)
	}
	if _, err := dblockpgx.New(e.pool, dblock.WithTTL(-1)); !errors.Is(err, dblock.ErrInvalidOption) {
		t.Fatalf("New with a bad option: %v", err)
	}
	if err := dblockpgx.Migrate(e.ctx, nil); !errors.Is(err, dblock.ErrInvalidOption) {
		t.Fatalf("Migrate(nil): %v", err)
	}
	if _, err := dblockpgx.LockTx(e.ctx, e.pl, nil, "k"); !errors.Is(err, dblock.ErrInvalidOption) {
		t.Fatalf("LockTx with a nil pgx.Tx: %v", err)
	}
	tx := beginPgx(t, e.pool)
	if _, err := dblockpgx.LockTx(e.ctx, nil, tx, "k"); !errors.Is(err, dblock.ErrInvalidOption) {
		t.Fatalf("LockTx on a nil Locker: %v", err)
	}
	if _, err := dblockpgx.TryLockTx(e.ctx, e.pl, tx, ""); !errors.Is(err, dblock.ErrInvalidKey) {
		t.Fatalf("TryLockTx of an empty key: %v", err)
	}
	if err := dblockpgx.Check(e.ctx, nil, tx); !errors.Is(err, dblock.ErrNotHeld) {
		t.Fatalf("Check of a nil Lock: %v", err)
	}
	lk, err := e.pl.TryLock(e.ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := dblockpgx.Check(e.ctx, lk, nil); !errors.Is(err, dblock.ErrInvalidOption) {
		t.Fatalf("Check with a nil pgx.Tx: %v", err)
	}
	if err := lk.Unlock(e.ctx); err != nil {
		t.Fatal(err)
	}
}

// Every exec mode a pgx pool may be configured with (a DSN for a pooler in
// transaction mode names exec or simple_protocol) serves the Locker's
// statements, LockTx and Check, several goroutines at once.
func TestExecModes(t *testing.T) {
	for _, mode := range []pgx.QueryExecMode{
		pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe, pgx.QueryExecModeDescribeExec,
		pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol,
	} {
		t.Run(mode.String(), func(t *testing.T) {
			e := setup(t)
			pool := newPool(t, func(c *pgxpool.Config) { c.ConnConfig.DefaultQueryExecMode = mode })
			l, err := dblockpgx.New(pool, dblock.WithTable(e.table))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 10 {
						lk, err := l.TryLock(e.ctx, "k"+string(rune('a'+w)), dblock.Data([]byte{0, 1, 2}))
						if err == nil {
							err = lk.Unlock(e.ctx)
						}
						if err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			lk, err := l.TryLock(e.ctx, "lease")
			if err != nil {
				t.Fatal(err)
			}
			tx := beginPgx(t, pool)
			if err := dblockpgx.Check(e.ctx, lk, tx); err != nil {
				t.Fatal(err)
			}
			if _, err := dblockpgx.TryLockTx(e.ctx, l, tx, "lease"); !errors.Is(err, dblock.ErrLocked) {
				t.Fatalf("TryLockTx of a leased key: %v, want ErrLocked", err)
			}
			if _, err := dblockpgx.LockTx(e.ctx, l, tx, "tx"); err != nil {
				t.Fatal(err)
			}
			if _, err := e.sl.TryLock(e.ctx, "tx"); !errors.Is(err, dblock.ErrLocked) {
				t.Fatalf("TryLock of a key the pgx.Tx holds: %v, want ErrLocked", err)
			}
			if err := tx.Commit(e.ctx); err != nil {
				t.Fatal(err)
			}
			if err := lk.Unlock(e.ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
