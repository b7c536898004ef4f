package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/dialect/sqlite"
	_ "modernc.org/sqlite"
)

// openSQLite opens a SQLite file with busy_timeout busy (ms), in WAL mode.
func openSQLite(t *testing.T, path string, busy int) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout("+strconv.Itoa(busy)+")&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestSQLiteClassify(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "c.db")
	d := sqlite.New(dialect.Config{Table: "t_c"})
	holder := openSQLite(t, path, 5000)
	if err := dblock.Migrate(ctx, holder, dblock.WithTable("t_c")); err != nil {
		t.Fatal(err)
	}
	conn, err := holder.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	impatient := openSQLite(t, path, 0)
	_, _, err = d.Upsert(ctx, impatient, "k", "o", time.Second, nil)
	if err == nil || d.Classify(err) != dialect.RolledBack {
		t.Errorf("acquire while another connection writes: %v, class %d, want dialect.RolledBack", err, d.Classify(err))
	}
	if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	_, _, err = sqlite.New(dialect.Config{Table: "t_none"}).Upsert(ctx, impatient, "k", "o", time.Second, nil)
	if d.Classify(err) != dialect.NoTable {
		t.Errorf("missing table: %v, class %d, want dialect.NoTable", err, d.Classify(err))
	}
	dead := openSQLite(t, filepath.Join(t.TempDir(), "no", "such", "dir.db"), 0)
	_, _, err = d.Upsert(ctx, dead, "k", "o", time.Second, nil)
	if d.Classify(err) != dialect.Conn {
		t.Errorf("unopenable file: %v, class %d, want dialect.Conn", err, d.Classify(err))
	}
	if d.Classify(context.Canceled) != dialect.Other {
		t.Error("context.Canceled classified as a database condition")
	}
}

// renew bumps update_time of the live acquisitions it is given, whatever
// their keys contain, and returns the others; reap deletes at most its limit
// and raises the token floor through the trigger.
func TestSQLiteRenewAndReap(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := openSQLite(t, filepath.Join(t.TempDir(), "r.db"), 5000)
	if err := dblock.Migrate(ctx, db, dblock.WithTable("t_r")); err != nil {
		t.Fatal(err)
	}
	d := sqlite.New(dialect.Config{Table: "t_r"})
	take := func(key string) dialect.Ref {
		t.Helper()
		tok, ok, err := d.Upsert(ctx, db, key, "o", time.Minute, nil)
		if err != nil || !ok {
			t.Fatalf("acquire %q = %v, %v", key, ok, err)
		}
		return dialect.Ref{Key: key, Token: tok}
	}
	updateTime := func(key string) (us int64) {
		t.Helper()
		if err := db.QueryRowContext(ctx, `SELECT update_time FROM "t_r" WHERE key_id = ?1`, key).Scan(&us); err != nil {
			t.Fatal(err)
		}
		return us
	}
	live := []dialect.Ref{take(`"quoted", [json] \ ключ-🔒`), take("plain")}
	stale := take("stale")
	if _, err := db.ExecContext(ctx, `UPDATE "t_r" SET update_time = update_time - 5000000`); err != nil {
		t.Fatal(err)
	}
	before, staleBefore := updateTime("plain"), updateTime("stale")
	lost, busy, err := d.Renew(ctx, db, append(live, dialect.Ref{Key: stale.Key, Token: stale.Token + 1}, dialect.Ref{Key: "absent", Token: 1}))
	if err != nil || len(busy) != 0 {
		t.Fatal(err)
	}
	if len(lost) != 2 || lost[0].Key != "stale" || lost[1].Key != "absent" {
		t.Errorf("renew lost %v, want the wrong token and the absent key", lost)
	}
	for _, r := range live {
		if after := updateTime(r.Key); after < before+4000000 {
			t.Errorf("%q not renewed: update_time %d, was %d (5 s back)", r.Key, after, before)
		}
	}
	if after := updateTime("stale"); after != staleBefore {
		t.Errorf("stale acquisition renewed: update_time %d, want %d", after, staleBefore)
	}

	for _, r := range append(live, stale) {
		if ok, _, err := d.Release(ctx, db, r.Key, "o", r.Token); !ok || err != nil {
			t.Fatalf("release %q = %v, %v", r.Key, ok, err)
		}
	}
	keys, err := d.Reap(ctx, db, 2)
	if err != nil || len(keys) != 2 {
		t.Fatalf("reap(limit 2) = %v, %v; want 2 of the 3 released rows", keys, err)
	}
	var floor int64
	if err := db.QueryRowContext(ctx, `SELECT floor_token FROM "t_r_fence"`).Scan(&floor); err != nil {
		t.Fatal(err)
	}
	if floor < min(live[0].Token, live[1].Token, stale.Token) {
		t.Errorf("floor %d not raised by the deleted rows", floor)
	}
	if again := take(keys[0]); again.Token <= floor {
		t.Errorf("token %d of a reaped key not above the floor %d", again.Token, floor)
	}
}

// List shows live holders only, sorted by key, with the database clock's
// remaining lease; ForceRelease releases whatever live holder a key has,
// returns it, and the holder then loses its lock.
func TestSQLiteAdmin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := openSQLite(t, filepath.Join(t.TempDir(), "admin.db"), 5000)
	if err := dblock.Migrate(ctx, db, dblock.WithTable("t_admin")); err != nil {
		t.Fatal(err)
	}
	l, err := dblock.New(db, dblock.WithTable("t_admin"), dblock.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a := sqlite.New(dialect.Config{Table: "t_admin"})
	take := func(key string, opts ...dblock.LockOption) *dblock.Lock {
		t.Helper()
		lk, err := l.TryLock(ctx, key, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return lk
	}
	b := take("b", dblock.Owner("w1"), dblock.TTL(5*time.Second))
	take("b", dblock.Owner("w1"), dblock.TTL(2*time.Second)) // re-entry keeps the longer lease
	take("a")
	take("expired")
	take("released").Unlock(ctx)
	if _, err := db.ExecContext(ctx, `UPDATE "t_admin" SET lease_ms = 0 WHERE key_id = 'expired'`); err != nil {
		t.Fatal(err)
	}

	infos, err := a.List(ctx, db)
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

	info, ok, err := a.ForceRelease(ctx, db, "b")
	if err != nil || !ok || info.Owner != "w1" || info.Depth != 2 || info.Token != b.Token() {
		t.Fatalf("forceRelease b = %+v, %v, %v; want w1's depth-2 acquisition", info, ok, err)
	}
	for _, key := range []string{"b", "expired", "released", "never"} {
		if _, ok, err := a.ForceRelease(ctx, db, key); ok || err != nil {
			t.Errorf("forceRelease %q with no live holder = %v, %v; want false, nil", key, ok, err)
		}
	}
	if err := b.Unlock(ctx); !errors.Is(err, dblock.ErrNotHeld) {
		t.Errorf("holder's Unlock after forceRelease = %v, want dblock.ErrNotHeld", err)
	}
	next := take("b", dblock.Owner("w2"))
	if next.Token() <= b.Token() {
		t.Errorf("token after forceRelease %d, not above %d", next.Token(), b.Token())
	}
	if infos, err := a.List(ctx, db); err != nil || len(infos) != 2 || infos[1].Owner != "w2" || infos[1].Depth != 1 {
		t.Errorf("list after forceRelease and a new holder = %+v, %v", infos, err)
	}
}
