package dblock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/faultproxy"
)

// Lock, Do and Lock with WithFIFO, started while every connection to the
// database fails (a proxy that closes each at once, as a restarting server
// does), wait through the outage and take the key once the database is
// back, within their 30 s context. They used to return the first
// connection error at once.
func TestWaitsSurviveOutage(t *testing.T) {
	calls := map[string]func(ctx context.Context, l *dblock.Locker) error{
		"Lock": func(ctx context.Context, l *dblock.Locker) error {
			lk, err := l.Lock(ctx, "outage")
			if err == nil {
				err = lk.Unlock(ctx)
			}
			return err
		},
		"Do": func(ctx context.Context, l *dblock.Locker) error {
			return l.Do(ctx, "outage", func(context.Context) error { return nil })
		},
	}
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		for name, call := range calls {
			for _, fifo := range []bool{false, true} {
				if fifo {
					name += "/fifo"
				}
				t.Run(name, func(t *testing.T) { testOutage(t, d, fifo, call) })
			}
		}
	})
}

func testOutage(t *testing.T, d dblock.Dialect, fifo bool, call func(context.Context, *dblock.Locker) error) {
	direct := dbtest.Open(t, d)
	table := dbtest.Table(t, direct, d)
	db, p := proxied(t, d)
	rec := newLogRecorder()
	opts := []dblock.Option{dblock.WithLogger(slog.New(rec))}
	if fifo {
		opts = append(opts, dblock.WithFIFO())
	}
	l := lockerOn(t, db, table, opts...)
	p.SetMode(faultproxy.Down)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() { got <- call(ctx, l) }()
	for waiting := false; !waiting; {
		select {
		case err := <-got:
			t.Fatalf("returned during the outage: %v", err)
		case r := <-rec.recs:
			waiting = strings.Contains(r.Message, "database error while waiting")
		case <-ctx.Done():
			t.Fatal("no sign of a wait through the outage")
		}
	}
	p.SetMode(faultproxy.Forward)
	if err := <-got; err != nil {
		t.Fatalf("after the outage: %v", err)
	}
}

// A wait that its context ends during an outage says so, and names the
// last database error; errors that will not heal return at once.
func TestWaitOutageErrors(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		direct := dbtest.Open(t, d)
		table := dbtest.Table(t, direct, d)
		db, p := proxied(t, d)
		rec := newLogRecorder()
		l := lockerOn(t, db, table, dblock.WithLogger(slog.New(rec)))
		p.SetMode(faultproxy.Down)
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan error, 1)
		go func() {
			_, err := l.Lock(ctx, "outage")
			got <- err
		}()
		rec.await(t, "database error while waiting", 30*time.Second)
		cancel()
		err := <-got
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "last database error") {
			t.Fatalf("Lock cancelled during an outage: %v, want context.Canceled and the last database error", err)
		}

		// A table that does not exist will not appear by waiting.
		p.SetMode(faultproxy.Forward)
		missing := lockerOn(t, db, table+"_missing")
		ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := missing.Lock(ctx, "outage"); !errors.Is(err, dblock.ErrNoSchema) || ctx.Err() != nil {
			t.Fatalf("Lock on a missing table: %v (context: %v), want ErrNoSchema at once", err, ctx.Err())
		}
	})
}
