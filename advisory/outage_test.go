package advisory_test

import (
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock/advisory"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/faultproxy"
)

// recorder hands every log record's message to a channel.
type recorder struct{ msgs chan string }

func (h recorder) Enabled(context.Context, slog.Level) bool { return true }
func (h recorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h recorder) WithGroup(string) slog.Handler            { return h }
func (h recorder) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.msgs <- r.Message:
	default:
	}
	return nil
}

// A blocking Lock started while every connection fails (as during a server
// restart) waits through the outage and takes the key once the database is
// back, within its 30 s context.
func TestLockSurvivesOutage(t *testing.T) {
	for _, d := range dbtest.Servers {
		t.Run(string(d), func(t *testing.T) {
			p, dsn := dbtest.Proxy(t, d)
			db, err := sql.Open(dbtest.DriverName(d), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			rec := recorder{make(chan string, 64)}
			l := lockerOn(t, db, advisory.WithLogger(slog.New(rec)))
			p.SetMode(faultproxy.Down)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			got := make(chan error, 1)
			go func() {
				lk, err := l.Lock(ctx, randomKey("outage"))
				if err == nil {
					err = lk.Unlock(ctx)
				}
				got <- err
			}()
			for waiting := false; !waiting; {
				select {
				case err := <-got:
					t.Fatalf("returned during the outage: %v", err)
				case m := <-rec.msgs:
					waiting = strings.Contains(m, "database error while waiting")
				case <-ctx.Done():
					t.Fatal("no sign of a wait through the outage")
				}
			}
			p.SetMode(faultproxy.Forward)
			if err := <-got; err != nil {
				t.Fatalf("after the outage: %v", err)
			}
		})
	}
}
