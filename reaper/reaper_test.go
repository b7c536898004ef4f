package reaper_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/reaper"
)

// record is what a test sees of one log record.
type record struct {
	msg     string
	removed int64
}

// recorder is a slog.Handler that hands records to a buffered channel.
type recorder struct{ ch chan record }

func newRecorder() *recorder { return &recorder{ch: make(chan record, 1024)} }

func (h *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *recorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recorder) WithGroup(string) slog.Handler            { return h }
func (h *recorder) Handle(_ context.Context, r slog.Record) error {
	rec := record{msg: r.Message}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "removed" {
			rec.removed = a.Value.Int64()
		}
		return true
	})
	select {
	case h.ch <- rec:
	default:
	}
	return nil
}

// nextPass waits for the record that ends a pass (removed, nothing to
// remove, failed or cancelled).
func (h *recorder) nextPass(t *testing.T, within time.Duration) record {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case r := <-h.ch:
			if !strings.Contains(r.msg, "cron:") {
				return r
			}
		case <-timeout:
			t.Fatalf("no pass ended within %v", within)
		}
	}
}

func newLocker(t *testing.T, db *sql.DB, table string) *dblock.Locker {
	t.Helper()
	l, err := dblock.New(db, dblock.WithTable(table), dblock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// released leaves n released rows (prefix0..) in l's table.
func released(t *testing.T, l *dblock.Locker, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		lk, err := l.TryLock(ctx, fmt.Sprintf("%s%d", prefix, i))
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func countRows(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// New checks its options without a round trip: the Locker's pool is not
// connected first (dbtest.Locker's connection and migration took over
// 10 s on a loaded machine, and failed the test), and no pass runs.
func TestNewValidates(t *testing.T) {
	db, err := sql.Open(dbtest.DriverName(dblock.Postgres), dbtest.DSN(dblock.Postgres))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	l, err := dblock.New(db, dblock.WithDialect(dblock.Postgres))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if _, err := reaper.New(nil); !errors.Is(err, dblock.ErrInvalidOption) {
		t.Errorf("nil Locker: %v", err)
	}
	for _, spec := range []string{"", "every minute", "@every", "61 * * * *", "* * * * * *"} {
		if _, err := reaper.New(l, reaper.WithSchedule(spec)); !errors.Is(err, dblock.ErrInvalidOption) {
			t.Errorf("schedule %q: %v", spec, err)
		}
	}
	if _, err := reaper.New(l, reaper.WithLogger(nil)); !errors.Is(err, dblock.ErrInvalidOption) {
		t.Errorf("nil logger: %v", err)
	}
	if _, err := reaper.New(l, nil); !errors.Is(err, dblock.ErrInvalidOption) {
		t.Errorf("nil option: %v", err)
	}
	r, err := reaper.New(l)
	if err != nil {
		t.Fatal(err)
	}
	if r.Schedule() != reaper.DefaultSchedule || reaper.DefaultSchedule != "@every 1m" {
		t.Errorf("default schedule %q", r.Schedule())
	}
	for _, spec := range []string{"*/5 * * * *", "@hourly", "@every 30s"} {
		if _, err := reaper.New(l, reaper.WithSchedule(spec)); err != nil {
			t.Errorf("schedule %q: %v", spec, err)
		}
	}
	r.Stop() // before Start: fine, and Start is then a no-op
	r.Start()
	r.Stop()
}

// TestConcurrentReapers starts three Reapers on one table with the same
// schedule, so their passes run at the same moment: every dead row goes
// exactly once, without errors, and live rows stay.
func TestConcurrentReapers(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		const dead, reapers = 600, 3
		db := dbtest.Open(t, d)
		table := dbtest.Table(t, db, d)
		l := newLocker(t, db, table)
		released(t, l, "dead-", dead)
		var live []*dblock.Lock
		for _, key := range []string{"live-a", "live-b"} {
			lk, err := l.TryLock(context.Background(), key)
			if err != nil {
				t.Fatal(err)
			}
			live = append(live, lk)
		}
		logs := make([]*recorder, reapers)
		for i := range reapers {
			logs[i] = newRecorder()
			r, err := reaper.New(newLocker(t, dbtest.Open(t, d), table),
				reaper.WithSchedule("@every 1s"), reaper.WithLogger(slog.New(logs[i])))
			if err != nil {
				t.Fatal(err)
			}
			r.Start()
			t.Cleanup(r.Stop)
		}
		var total int64
		for i := range reapers {
			rec := logs[i].nextPass(t, 5*time.Second)
			if strings.Contains(rec.msg, "failed") {
				t.Fatalf("reaper %d: %s", i, rec.msg)
			}
			total += rec.removed
		}
		t.Logf("%s: first passes removed %d rows", d, total)
		// A reaper may stop a pass early when the others took part of a
		// batch; later passes take the rest.
		for total < dead {
			for i := range reapers {
				rec := logs[i].nextPass(t, 5*time.Second)
				if strings.Contains(rec.msg, "failed") {
					t.Fatalf("reaper %d: %s", i, rec.msg)
				}
				total += rec.removed
			}
		}
		if total != dead {
			t.Fatalf("reapers removed %d rows; want exactly %d", total, dead)
		}
		if got := countRows(t, db, table); got != len(live) {
			t.Fatalf("%d rows left; want the %d live ones", got, len(live))
		}
		for _, lk := range live {
			if err := lk.Unlock(context.Background()); err != nil {
				t.Fatalf("live lock %s: %v", lk.Key(), err)
			}
		}
	})
}

// blockReap makes a reaping pass on table wait: it holds, in an open
// transaction, what a pass must lock first.
func blockReap(t *testing.T, db *sql.DB, d dblock.Dialect, table string) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	q := "LOCK TABLE " + table + " IN ACCESS EXCLUSIVE MODE"
	switch d {
	case dblock.MySQL:
		q = "SELECT floor_token FROM " + table + "_fence WHERE id = 1 FOR UPDATE"
	case dblock.SQLite: // the one writer of the file
		q = "UPDATE " + table + "_fence SET floor_token = floor_token WHERE id = 1"
	}
	if _, err := tx.ExecContext(ctx, q); err != nil {
		t.Fatal(err)
	}
}

// TestStopWaitsForPass stops a Reaper while its pass is blocked in the
// database: Stop cancels it and returns only after the pass has ended.
func TestStopWaitsForPass(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		db := dbtest.Open(t, d)
		table := dbtest.Table(t, db, d)
		l := newLocker(t, dbtest.Open(t, d), table)
		blockReap(t, db, d, table)
		logs := newRecorder()
		r, err := reaper.New(l, reaper.WithSchedule("@every 1s"), reaper.WithLogger(slog.New(logs)))
		if err != nil {
			t.Fatal(err)
		}
		r.Start()
		timeout := time.After(5 * time.Second)
	wait:
		for {
			select {
			case rec := <-logs.ch:
				if strings.HasSuffix(rec.msg, "cron: run") {
					break wait
				}
				if !strings.Contains(rec.msg, "cron:") {
					t.Fatalf("pass ended while blocked: %s", rec.msg)
				}
			case <-timeout:
				t.Fatal("no pass started")
			}
		}
		r.Stop()
		// The pass logged its end before Stop returned.
		for {
			select {
			case rec := <-logs.ch:
				if strings.Contains(rec.msg, "cancelled by Stop") {
					r.Stop() // idempotent
					return
				}
			default:
				t.Fatal("Stop returned before the running pass ended")
			}
		}
	})
}
