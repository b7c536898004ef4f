package dblock_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// Notifications name no key in clear: a role that LISTENs on the table's
// channel sees tags. A forged notification (raw key names, random tags, a
// tag of a held key) only makes a waiter look again: the holder keeps its
// lock, the waiter takes the key only once it is released.
func TestNotifyPayloads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := dbtest.Open(t, dblock.Postgres)
	table := dbtest.Table(t, db, dblock.Postgres)
	spy, err := pgx.Connect(ctx, dbtest.DSN(dblock.Postgres))
	if err != nil {
		t.Fatal(err)
	}
	defer spy.Close(context.Background())
	channel := pgx.Identifier{"dblock_" + table}.Sanitize()
	if _, err := spy.Exec(ctx, "LISTEN "+channel); err != nil {
		t.Fatal(err)
	}
	holder, waiter := lockerOn(t, db, table), lockerOn(t, db, table)
	const key = "invoice-4711"
	lk, err := holder.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	<-dblock.ListenerReady(holder) // so that it hears the waiter, and announces its release
	got := make(chan error, 1)
	var w *dblock.Lock
	go func() {
		var err error
		w, err = waiter.Lock(ctx, key)
		got <- err
	}()
	// The waiter announces itself ("W"); wait for it.
	payload := next(t, ctx, spy)
	if !strings.HasPrefix(payload, "W:") {
		t.Fatalf("first event %q, want a waiter's", payload)
	}
	tag := payload[strings.LastIndexByte(payload, ':')+1:]
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(tag) || strings.Contains(payload, key) {
		t.Fatalf("payload %q names the key or is not a tag", payload)
	}
	// Forgeries: each makes the waiter look again, and find the key held.
	for _, forged := range []string{"R:" + key, "F:someone:" + key, "R:" + tag, "F:x:" + tag, "R:" + strings.Repeat("0", 32), "garbage"} {
		if _, err := db.ExecContext(ctx, `SELECT pg_notify($1, $2)`, "dblock_"+table, forged); err != nil {
			t.Fatal(err)
		}
		for p := next(t, ctx, spy); p != forged; p = next(t, ctx, spy) {
			if !strings.HasPrefix(p, "W:") || strings.Contains(p, key) { // a waiter may say again that it waits
				t.Fatalf("spy heard %q, want the forgery %q", p, forged)
			}
		}
	}
	select {
	case err := <-got:
		t.Fatalf("the waiter returned while the key was held: %v", err)
	default:
	}
	if err := lk.Err(); err != nil {
		t.Fatalf("the holder lost its lock to forged events: %v", err)
	}
	// A release is announced only while another Locker has said lately
	// (within wantWindow) that it waits. The waiter says it again every
	// second, but on a loaded machine its last word may have aged out by
	// now (a CI run under -race waited here for an announcement that never
	// came): release once the holder knows of it.
	waitUntil(t, "the holder to know of the waiter", func() bool { return dblock.WantedElsewhere(holder, key) })
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter after the release: %v", err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The release that woke it was announced by tag too.
	for p := ""; !strings.HasPrefix(p, "F:"); {
		if p = next(t, ctx, spy); strings.Contains(p, key) {
			t.Fatalf("payload %q names the key", p)
		}
	}
}

// next returns the spy's next notification payload.
func next(t *testing.T, ctx context.Context, c *pgx.Conn) string {
	t.Helper()
	n, err := c.WaitForNotification(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return n.Payload
}
