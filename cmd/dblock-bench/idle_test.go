package main

import (
	"context"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// The idle-waiters case waits for every key's first waiter after the
// releases, however long it measured before: it used the settling
// phase's deadline, already past after a -duration over 30 s, and so
// failed with "only 86 of 100 keys were taken after their release". Here
// the settling deadline passes at once instead.
func TestIdleWakeDeadline(t *testing.T) {
	defer func(s time.Duration) { idleSettle = s }(idleSettle)
	idleSettle = 0
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tg, err := openTarget(ctx, dblock.Postgres, dbtest.DSN(dblock.Postgres), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tg.Close(); err != nil {
			t.Error(err)
		}
	}()
	row, err := idleWaiters(ctx, tg, config{duration: 10 * time.Millisecond, ttl: 30 * time.Second}, 200)
	if err != nil {
		t.Fatal(err)
	}
	if row.Ops != 100 {
		t.Errorf("%d keys' first waiters woken, want 100", row.Ops)
	}
}
