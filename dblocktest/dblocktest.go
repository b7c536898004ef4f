// Package dblocktest gives the tests of code that uses dblock a real
// [dblock.Locker], on a throwaway SQLite file of the test's own, and ways
// to make a lock the code holds be lost, so that its lost-lock paths can be
// tested: [Expire] ends the lease on the database, [TakeOver] gives the key
// to another owner. It plays the part of DistributedLock's and ShedLock's
// in-memory providers, with dblock's own code under it: the locks behave
// as they do on a server (leases, heartbeats, fencing tokens, waits, the
// history), within one host; only LockTx and Check, which need a server,
// return errors.ErrUnsupported, as on any SQLite file.
//
//	func TestNightlyStopsWhenLockLost(t *testing.T) {
//		l := dblocktest.New(t)
//		... start the code under test with l, wait until it holds "nightly" ...
//		dblocktest.Expire(t, l, "nightly")
//		... the code sees its lock's Done close, or Do's context end ...
//	}
//
// Each Locker renews its leases every 50 ms (dblock.WithHeartbeat) unless
// told otherwise, so that a holder hears of a lost lock within about that
// long; the lease is dblock's default, 30 s, so that a busy test machine
// never loses a lock by itself. The table's history is on: l.History
// tells what happened to a key. The package links modernc.org/sqlite, as
// the dblock command does (no cgo; its first build takes a minute or
// more).
package dblocktest

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dialect/sqlite"
	_ "modernc.org/sqlite" // the SQLite driver: pure Go, no cgo
)

// Heartbeat is how often the Lockers of New and Peer renew their leases,
// unless their options say otherwise.
const Heartbeat = 50 * time.Millisecond

// sqliteParams: WAL, so that readers never wait for the writer, and a busy
// timeout, so that a writer waits for the file instead of failing.
const sqliteParams = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"

// timeout bounds what the helpers do on the database.
const timeout = 30 * time.Second

// database is what New made for a Locker: the pool, shared by its peers.
type database struct {
	db   *sql.DB
	path string
}

// made maps the Lockers of New and Peer to their database.
var made sync.Map // *dblock.Locker -> *database

// New returns a Locker on a fresh lock table (dblock.DefaultTable, its
// history on) in a new SQLite file in t.TempDir(), migrated. opts are
// dblock.New's (WithTTL, WithFIFO, WithObserver, WithLogger, ...): they
// come after the package's defaults, a heartbeat of Heartbeat and a logger
// that writes through t.Log, and override them; WithTable and WithDialect
// fail the test (the table is dblock.DefaultTable, on SQLite). When the test ends, the Locker is closed (its locks
// released), then the file's pool; t.TempDir removes the file.
func New(t testing.TB, opts ...dblock.Option) *dblock.Locker {
	t.Helper()
	path := filepath.Join(t.TempDir(), "locks.db")
	db, err := sql.Open("sqlite", "file:"+path+"?"+sqliteParams)
	if err != nil {
		t.Fatalf("dblocktest: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("dblocktest: closing %s: %v", path, err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	quiet := dblock.WithLogger(slog.New(slog.DiscardHandler))
	if err := dblock.Migrate(ctx, db, dblock.WithDialect(dblock.SQLite), dblock.WithHistory(), quiet); err != nil {
		t.Fatalf("dblocktest: migrating %s: %v", path, err)
	}
	return open(t, &database{db: db, path: path}, opts)
}

// Peer returns another Locker on the database and table of l, which New
// (or Peer) returned: as another process's Locker would be, it contends
// with l for keys, and its owners are its own. opts are as New's. It is
// closed when the test ends.
func Peer(t testing.TB, l *dblock.Locker, opts ...dblock.Option) *dblock.Locker {
	t.Helper()
	return open(t, databaseOf(t, l), opts)
}

// open returns a Locker on d, closed when the test ends.
func open(t testing.TB, d *database, opts []dblock.Option) *dblock.Locker {
	t.Helper()
	all := append([]dblock.Option{dblock.WithDialect(dblock.SQLite), dblock.WithHeartbeat(Heartbeat),
		dblock.WithLogger(slog.New(slog.NewTextHandler(logWriter{t}, nil)))}, opts...)
	l, err := dblock.New(d.db, all...)
	if err != nil {
		t.Fatalf("dblocktest: %v", err)
	}
	if l.Table() != dblock.DefaultTable || l.Dialect() != dblock.SQLite {
		_ = l.Close()
		t.Fatalf("dblocktest: WithTable and WithDialect are not for dblocktest: its Lockers use %s on SQLite", dblock.DefaultTable)
	}
	made.Store(l, d)
	t.Cleanup(func() {
		made.Delete(l)
		if err := l.Close(); err != nil {
			t.Errorf("dblocktest: closing a Locker: %v", err)
		}
	})
	return l
}

// databaseOf returns l's database, failing the test when New did not make l.
func databaseOf(t testing.TB, l *dblock.Locker) *database {
	t.Helper()
	d, ok := made.Load(l)
	if !ok {
		t.Fatalf("dblocktest: the Locker was not made by dblocktest.New or Peer (or the test that made it has ended)")
	}
	return d.(*database)
}

// Expire ends the lease of key on the database now, as if its holder had
// stopped renewing it a lease ago (a process paused, a network cut off):
// the holder's next renewal, within Heartbeat, finds the row no longer its
// own, and the Lock's Done closes, its Err (and Do's context's cause)
// wrapping dblock.ErrLockLost (with dblock.ErrTakenOver: the holder cannot
// tell the two apart); its Unlock returns dblock.ErrNotHeld. The key is
// then free for anyone, the holder too. l is the Locker of New or Peer
// that the holder uses, or another on the same database. It fails the test
// when no live lease holds key.
func Expire(t testing.TB, l *dblock.Locker, key string) {
	t.Helper()
	d := databaseOf(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := d.db.ExecContext(ctx, sqlite.ExpireSQL(l.Table()), key)
	if err != nil {
		t.Fatalf("dblocktest: Expire(%q): %v", key, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("dblocktest: Expire(%q): no live lease holds the key (%d rows, %v)", key, n, err)
	}
}

// TakeOver breaks key's holder, as dblock unlock --force does
// (Locker.ForceUnlock), and takes the key for another owner, on a Locker
// of its own (Peer's): the holder's Done closes within Heartbeat, its
// Err wrapping dblock.ErrLockLost and dblock.ErrTakenOver, its Unlock
// returns dblock.ErrNotHeld, and the key stays held by the new owner, so
// that the code under test cannot take it back, until the returned Lock
// is unlocked or the test ends. It fails the test when no live lease holds
// key, or when someone else takes the key between the break and the take.
func TakeOver(t testing.TB, l *dblock.Locker, key string) *dblock.Lock {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := l.ForceUnlockBy(ctx, key, "dblocktest.TakeOver"); err != nil {
		t.Fatalf("dblocktest: TakeOver(%q): %v", key, err)
	}
	lk, err := Peer(t, l).TryLock(ctx, key)
	if errors.Is(err, dblock.ErrLocked) {
		t.Fatalf("dblocktest: TakeOver(%q): taken by another owner right after the break: %v", key, err)
	}
	if err != nil {
		t.Fatalf("dblocktest: TakeOver(%q): %v", key, err)
	}
	return lk
}

// logWriter writes a Locker's log through t.Log: shown with a failure
// (or go test -v).
type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
