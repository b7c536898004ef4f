package dblock

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// list shows live holders only, sorted by key, with the database clock's
// remaining lease; forceRelease releases whatever live holder a key has,
// returns it, and the holder then loses its lock.
func TestSQLiteAdmin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := openSQLite(t, filepath.Join(t.TempDir(), "admin.db"), 5000)
	if err := Migrate(ctx, db, WithTable("t_admin")); err != nil {
		t.Fatal(err)
	}
	l, err := New(db, WithTable("t_admin"), WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, ok := l.d.(adminDialect)
	if !ok {
		t.Fatal("sqlite dialect does not implement adminDialect")
	}
	take := func(key string, opts ...LockOption) *Lock {
		t.Helper()
		lk, err := l.TryLock(ctx, key, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return lk
	}
	b := take("b", Owner("w1"), TTL(5*time.Second))
	take("b", Owner("w1"), TTL(2*time.Second)) // re-entry keeps the longer lease
	take("a")
	take("expired")
	take("released").Unlock(ctx)
	if _, err := db.ExecContext(ctx, `UPDATE "t_admin" SET lease_ms = 0 WHERE key_id = 'expired'`); err != nil {
		t.Fatal(err)
	}

	infos, err := a.list(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 || infos[0].Key != "a" || infos[1].Key != "b" {
		t.Fatalf("list = %+v, want the live locks a and b, sorted", infos)
	}
	if got := infos[1]; got.Owner != "w1" || got.Depth != 2 || got.Token != b.Token() || got.HeldFor < 0 ||
		got.ExpiresIn <= 0 || got.ExpiresIn > 5*time.Second {
		t.Errorf("list b = %+v, want owner w1, depth 2, token %d, HeldFor >= 0, 0 < ExpiresIn <= 5s", got, b.Token())
	}
	if got := infos[0]; got.ExpiresIn <= 5*time.Second || got.ExpiresIn > 10*time.Second {
		t.Errorf("list a: ExpiresIn %v, want within the 10s lease and above b's", got.ExpiresIn)
	}

	info, ok, err := a.forceRelease(ctx, db, "b")
	if err != nil || !ok || info.Owner != "w1" || info.Depth != 2 || info.Token != b.Token() {
		t.Fatalf("forceRelease b = %+v, %v, %v; want w1's depth-2 acquisition", info, ok, err)
	}
	for _, key := range []string{"b", "expired", "released", "never"} {
		if _, ok, err := a.forceRelease(ctx, db, key); ok || err != nil {
			t.Errorf("forceRelease %q with no live holder = %v, %v; want false, nil", key, ok, err)
		}
	}
	if err := b.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("holder's Unlock after forceRelease = %v, want ErrNotHeld", err)
	}
	next := take("b", Owner("w2"))
	if next.Token() <= b.Token() {
		t.Errorf("token after forceRelease %d, not above %d", next.Token(), b.Token())
	}
	if infos, err := a.list(ctx, db); err != nil || len(infos) != 2 || infos[1].Owner != "w2" || infos[1].Depth != 1 {
		t.Errorf("list after forceRelease and a new holder = %+v, %v", infos, err)
	}
}
