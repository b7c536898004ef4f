package dblock_test

import (
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/faultproxy"
)

// logRecorder is a slog.Handler that hands every record to a buffered
// channel (dropping records when it is full), so a test can wait for the
// Locker to report something, and learn when it did.
type logRecorder struct{ recs chan slog.Record }

func newLogRecorder() *logRecorder { return &logRecorder{recs: make(chan slog.Record, 256)} }

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecorder) WithGroup(string) slog.Handler            { return h }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.recs <- r:
	default:
	}
	return nil
}

// lockerOn returns a Locker on table through db, closed at cleanup.
func lockerOn(t testing.TB, db *sql.DB, table string, opts ...dblock.Option) *dblock.Locker {
	t.Helper()
	l, err := dblock.New(db, append([]dblock.Option{dblock.WithTable(table)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// proxied returns a pool on d's server whose connections all go through a
// fault proxy, and the proxy. Both are closed at cleanup.
func proxied(t testing.TB, d dblock.Dialect) (*sql.DB, *faultproxy.Proxy) {
	t.Helper()
	p, dsn := dbtest.Proxy(t, d)
	db, err := sql.Open(dbtest.DriverName(d), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, p
}

// await returns the first record whose message contains msg, within d.
func (h *logRecorder) await(t testing.TB, msg string, d time.Duration) slog.Record {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case r := <-h.recs:
			if strings.Contains(r.Message, msg) {
				return r
			}
		case <-timeout:
			t.Fatalf("no log record %q within %v", msg, d)
		}
	}
}
