package dblock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

func TestSmoke(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := context.Background()
		l, _, _ := dbtest.Locker(t, d)
		a, err := l.TryLock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.TryLock(ctx, "k"); !errors.Is(err, dblock.ErrLocked) {
			t.Fatalf("second TryLock: %v", err)
		}
		if err := a.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		b, err := l.TryLock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("tokens %d %d", a.Token(), b.Token())
		if b.Token() <= a.Token() {
			t.Fatal("token")
		}
	})
}
