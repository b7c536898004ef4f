package mysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/migrate"
	_ "github.com/go-sql-driver/mysql"
)

// TestJournalMatchesTriggers: TiDB's history writer writes, for each change
// of a row, the events that the history's triggers write on MariaDB (the
// reference: schema/history/mysql.sql). Every pair of row states (none,
// free, held at depth 1 or 2, held by another owner, its lease live or run
// out), with and without ForceUnlock's label, is made by one statement
// on MariaDB; the triggers' events are compared with historyEvents' for
// the rows the writer's own reads saw before and after (and the label its
// read after saw), at the time the triggers wrote.
func TestJournalMatchesTriggers(t *testing.T) {
	dsn := os.Getenv("DBLOCK_MYSQL_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/test"
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() }) // after the tables' drop, registered later
	db.SetMaxOpenConns(1)            // one session: the label is a session variable
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := New(dialect.Config{Table: "t"}).(*mysqlDialect)
	e, err := d.engine.Get(ctx, db)
	if err != nil {
		t.Fatalf("the MySQL server at %s: %v", dsn, err)
	}
	if e == dialect.EngineTiDB || e.Distributed() {
		t.Skipf("%s runs no triggers: they are this test's reference (the history tests run the writer there)", e)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	table := "j_" + hex.EncodeToString(b[:])
	d = New(dialect.Config{Table: table}).(*mysqlDialect)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := migrate.Apply(ctx, conn, d, table, false, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if err := migrate.InstallHistory(ctx, conn, d, e, table); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	t.Cleanup(func() {
		for _, s := range []string{table, table + "_fence", table + "_version", table + "_queue", table + "_waiters", table + "_history"} {
			if _, err := db.Exec("DROP TABLE IF EXISTS " + d.Quote(s)); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	j := newJournal(table, d.Quote)
	tq, hq := d.Quote(table), d.Quote(dialect.HistoryTable(table))

	// A state of the row: nil for none; live says whether its lease runs
	// for an hour more or ran out an hour ago.
	type state struct {
		depth int
		token int64
		memo  string
		live  bool
	}
	states := []*state{nil,
		{0, 10, "", false},
		{1, 10, "a", true}, {2, 10, "a", true}, {1, 10, "a", false},
		{1, 11, "b", true}, {1, 11, "b", false}, {2, 11, "b", true},
	}
	set := func(s *state) string { // the values of a row in s
		ago := "UTC_TIMESTAMP(6) - INTERVAL 2 HOUR"
		if s.live {
			return fmt.Sprintf("memo = '%s', depth = %d, token = %d, lease_ms = 10800000, update_time = %s, acquired_time = %s", s.memo, s.depth, s.token, ago, ago)
		}
		return fmt.Sprintf("memo = '%s', depth = %d, token = %d, lease_ms = 1000, update_time = %s, acquired_time = %s - INTERVAL 1 HOUR", s.memo, s.depth, s.token, ago, ago)
	}
	cases := 0
	for i, from := range states {
		for _, to := range states {
			for _, label := range []sql.NullString{{}, {String: "by x", Valid: true}} {
				if from == nil && to == nil {
					continue
				}
				key := fmt.Sprintf("k%d", cases)
				cases++
				if from != nil {
					mustExec(t, db, "INSERT INTO "+tq+" SET key_id = ?, "+set(from), key)
				}
				var mark int64
				if err := db.QueryRow("SELECT COALESCE(MAX(id), 0) FROM " + hq).Scan(&mark); err != nil {
					t.Fatal(err)
				}
				before, err := j.before(ctx, db, []string{key})
				if err != nil {
					t.Fatal(err)
				}
				if label.Valid {
					mustExec(t, db, "SET @dblock_force = ?", label.String)
				}
				switch {
				case from == nil:
					mustExec(t, db, "INSERT INTO "+tq+" SET key_id = ?, "+set(to), key)
				case to == nil:
					mustExec(t, db, "DELETE FROM "+tq+" WHERE key_id = ?", key)
				default:
					mustExec(t, db, "UPDATE "+tq+" SET "+set(to)+" WHERE key_id = ?", key)
				}
				after, now, seen, err := j.after(ctx, db, []string{key})
				if err != nil {
					t.Fatal(err)
				}
				mustExec(t, db, "SET @dblock_force = NULL")
				if seen != label {
					t.Fatalf("the after-read saw label %v, want %v", seen, label)
				}
				rows, err := db.Query("SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', event_time), key_id, event, memo, token, depth, COALESCE(held_ms, -1), detail FROM "+hq+" WHERE id > ? ORDER BY id", mark)
				if err != nil {
					t.Fatal(err)
				}
				var want []histEvent
				ts := now
				for rows.Next() {
					var e histEvent
					if err := rows.Scan(&ts, &e.key, &e.event, &e.memo, &e.token, &e.depth, &e.held, &e.detail); err != nil {
						t.Fatal(err)
					}
					want = append(want, e)
				}
				if err := rows.Close(); err != nil {
					t.Fatal(err)
				}
				got := historyEvents(key, before[key], after[key], ts, label)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("state %d %+v -> %+v, label %v:\n got  %+v\n want %+v (the triggers')", i, from, to, label, got, want)
				}
			}
		}
	}
	t.Logf("%d changes of a row compared", cases)
}

func mustExec(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}
