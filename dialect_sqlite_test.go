package dblock

import (
	"context"
	"database/sql"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// openSQLite opens a fresh SQLite file for an internal test (internal/dbtest
// imports this package, so it cannot be used here). busy names the
// busy_timeout in milliseconds.
func openSQLite(t *testing.T, path string, busy int) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout("+strconv.Itoa(busy)+")&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// The trigger's body has a semicolon inside; it is written on one line so
// that splitting at line-ending semicolons keeps it whole, and it renames
// with the table.
func TestSQLiteMigrationStatements(t *testing.T) {
	migs, err := loadMigrations(newSQLite("t_abc"), "t_abc")
	if err != nil || len(migs) == 0 {
		t.Fatalf("loadMigrations = %v, %v", migs, err)
	}
	stmts := migs[0].statements
	if len(stmts) != 4 {
		t.Fatalf("%d statements, want 4:\n%s", len(stmts), strings.Join(stmts, "\n--\n"))
	}
	trig := stmts[3]
	for _, want := range []string{`CREATE TRIGGER IF NOT EXISTS "t_abc_fence_bd"`, `ON "t_abc" `, `UPDATE "t_abc_fence"`, "WHERE id = 1; END"} {
		if !strings.Contains(trig, want) {
			t.Errorf("trigger statement %q lacks %q", trig, want)
		}
	}
	for _, s := range stmts {
		if strings.Contains(s, "lock_table") {
			t.Errorf("statement still names lock_table: %s", s)
		}
	}
}

// SQLite's errors are classified by result code: a busy file is retried, a
// missing table is ErrNoSchema, an unopenable file is a connection failure.
func TestSQLiteClassify(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "c.db")
	d := newSQLite("t_c")
	holder := openSQLite(t, path, 5000)
	if err := Migrate(ctx, holder, WithTable("t_c")); err != nil {
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
	_, _, err = d.acquire(ctx, impatient, "k", "o", time.Second)
	if err == nil || d.classify(err) != errRolledBack {
		t.Errorf("acquire while another connection writes: %v, class %d, want errRolledBack", err, d.classify(err))
	}
	if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	_, _, err = newSQLite("t_none").acquire(ctx, impatient, "k", "o", time.Second)
	if d.classify(err) != errNoTable {
		t.Errorf("missing table: %v, class %d, want errNoTable", err, d.classify(err))
	}
	dead := openSQLite(t, filepath.Join(t.TempDir(), "no", "such", "dir.db"), 0)
	_, _, err = d.acquire(ctx, dead, "k", "o", time.Second)
	if d.classify(err) != errConn {
		t.Errorf("unopenable file: %v, class %d, want errConn", err, d.classify(err))
	}
	if d.classify(context.Canceled) != errOther {
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
	if err := Migrate(ctx, db, WithTable("t_r")); err != nil {
		t.Fatal(err)
	}
	d := newSQLite("t_r")
	take := func(key string) heldRef {
		t.Helper()
		tok, ok, err := d.acquire(ctx, db, key, "o", time.Minute)
		if err != nil || !ok {
			t.Fatalf("acquire %q = %v, %v", key, ok, err)
		}
		return heldRef{key, tok}
	}
	updateTime := func(key string) (us int64) {
		t.Helper()
		if err := db.QueryRowContext(ctx, `SELECT update_time FROM "t_r" WHERE key_id = ?1`, key).Scan(&us); err != nil {
			t.Fatal(err)
		}
		return us
	}
	live := []heldRef{take(`"quoted", [json] \ ключ-🔒`), take("plain")}
	stale := take("stale")
	if _, err := db.ExecContext(ctx, `UPDATE "t_r" SET update_time = update_time - 5000000`); err != nil {
		t.Fatal(err)
	}
	before, staleBefore := updateTime("plain"), updateTime("stale")
	lost, busy, err := d.renew(ctx, db, append(live, heldRef{stale.key, stale.token + 1}, heldRef{"absent", 1}))
	if err != nil || len(busy) != 0 {
		t.Fatal(err)
	}
	if len(lost) != 2 || lost[0].key != "stale" || lost[1].key != "absent" {
		t.Errorf("renew lost %v, want the wrong token and the absent key", lost)
	}
	for _, r := range live {
		if after := updateTime(r.key); after < before+4000000 {
			t.Errorf("%q not renewed: update_time %d, was %d (5 s back)", r.key, after, before)
		}
	}
	if after := updateTime("stale"); after != staleBefore {
		t.Errorf("stale acquisition renewed: update_time %d, want %d", after, staleBefore)
	}

	for _, r := range append(live, stale) {
		if ok, err := d.release(ctx, db, r.key, "o", r.token); !ok || err != nil {
			t.Fatalf("release %q = %v, %v", r.key, ok, err)
		}
	}
	keys, err := d.reap(ctx, db, 2)
	if err != nil || len(keys) != 2 {
		t.Fatalf("reap(limit 2) = %v, %v; want 2 of the 3 released rows", keys, err)
	}
	var floor int64
	if err := db.QueryRowContext(ctx, `SELECT floor_token FROM "t_r_fence"`).Scan(&floor); err != nil {
		t.Fatal(err)
	}
	if floor < min(live[0].token, live[1].token, stale.token) {
		t.Errorf("floor %d not raised by the deleted rows", floor)
	}
	if again := take(keys[0]); again.token <= floor {
		t.Errorf("token %d of a reaped key not above the floor %d", again.token, floor)
	}
}
