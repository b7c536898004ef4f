package advisory_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/advisory"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// The benchmarks time one lock+unlock cycle of an uncontended key: through
// this package, and through the raw statements on one pinned connection.
// Compare them within one run (same server, same load):
//
//	go test -run '^$' -bench . -benchtime 2s -count 3 ./advisory/

func BenchmarkPostgres(b *testing.B) {
	b.Run("advisory", func(b *testing.B) { benchLocker(b, dblock.Postgres) })
	b.Run("raw", func(b *testing.B) {
		conn := pinned(b, dbtest.Open(b, dblock.Postgres))
		id := advisory.KeyID(randomKey("bench"))
		ctx := b.Context()
		for b.Loop() {
			if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, id); err != nil {
				b.Fatal(err)
			}
			if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_unlock($1)`, id); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkMySQL(b *testing.B) {
	b.Run("advisory", func(b *testing.B) { benchLocker(b, dblock.MySQL) })
	// As most code writes it: the driver prepares, runs and closes a
	// statement per call (two round trips).
	b.Run("raw", func(b *testing.B) {
		benchGetLock(b, pinned(b, dbtest.Open(b, dblock.MySQL)), func(conn *sql.Conn, q string) func(ctx context.Context, args ...any) error {
			return func(ctx context.Context, args ...any) error {
				_, err := conn.ExecContext(ctx, q, args...)
				return err
			}
		})
	})
	// The fastest raw form: statements prepared once on the pinned conn.
	b.Run("raw-prepared", func(b *testing.B) {
		benchGetLock(b, pinned(b, dbtest.Open(b, dblock.MySQL)), func(conn *sql.Conn, q string) func(ctx context.Context, args ...any) error {
			st, err := conn.PrepareContext(b.Context(), q)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			return func(ctx context.Context, args ...any) error {
				_, err := st.ExecContext(ctx, args...)
				return err
			}
		})
	})
}

func benchLocker(b *testing.B, d dblock.Dialect) {
	l, _ := newLocker(b, d)
	key := randomKey("bench")
	ctx := b.Context()
	for b.Loop() {
		lk, err := l.Lock(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		if err := lk.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func benchGetLock(b *testing.B, conn *sql.Conn, stmt func(*sql.Conn, string) func(context.Context, ...any) error) {
	name := advisory.LockName(randomKey("bench"))
	lock, unlock := stmt(conn, `SELECT GET_LOCK(?, 0)`), stmt(conn, `SELECT RELEASE_LOCK(?)`)
	ctx := b.Context()
	for b.Loop() {
		if err := lock(ctx, name); err != nil {
			b.Fatal(err)
		}
		if err := unlock(ctx, name); err != nil {
			b.Fatal(err)
		}
	}
}

func pinned(b *testing.B, db *sql.DB) *sql.Conn {
	conn, err := db.Conn(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return conn
}

// BenchmarkPaired alternates one cycle through this package with one raw
// cycle on a pinned connection (prepared statements on MySQL, the fastest
// raw form) and reports both and their throughput ratio (raw time over
// advisory time; 1 means as fast as raw). Pairing the cycles cancels out
// load that changes during the run, which a shared machine has plenty of.
func BenchmarkPaired(b *testing.B) {
	for _, d := range dbtest.Servers {
		b.Run(string(d), func(b *testing.B) {
			l, db := newLocker(b, d)
			conn := pinned(b, db)
			key, rawKey := randomKey("bench"), randomKey("bench-raw")
			var lockSQL, unlockSQL string
			var rawArg any
			if d == dblock.Postgres {
				lockSQL, unlockSQL, rawArg = `SELECT pg_advisory_lock($1)`, `SELECT pg_advisory_unlock($1)`, advisory.KeyID(rawKey)
			} else {
				lockSQL, unlockSQL, rawArg = `SELECT GET_LOCK(?, 0)`, `SELECT RELEASE_LOCK(?)`, advisory.LockName(rawKey)
			}
			ctx := b.Context()
			lockSt, err := conn.PrepareContext(ctx, lockSQL)
			if err != nil {
				b.Fatal(err)
			}
			defer lockSt.Close()
			unlockSt, err := conn.PrepareContext(ctx, unlockSQL)
			if err != nil {
				b.Fatal(err)
			}
			defer unlockSt.Close()
			var adv, raw time.Duration
			for b.Loop() {
				t0 := time.Now()
				lk, err := l.Lock(ctx, key)
				if err != nil {
					b.Fatal(err)
				}
				if err := lk.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if _, err := lockSt.ExecContext(ctx, rawArg); err != nil {
					b.Fatal(err)
				}
				if _, err := unlockSt.ExecContext(ctx, rawArg); err != nil {
					b.Fatal(err)
				}
				adv += t1.Sub(t0)
				raw += time.Since(t1)
			}
			n := float64(b.N)
			b.ReportMetric(float64(adv.Nanoseconds())/n, "advisory-ns/cycle")
			b.ReportMetric(float64(raw.Nanoseconds())/n, "raw-ns/cycle")
			b.ReportMetric(float64(raw)/float64(adv), "ratio")
		})
	}
}
