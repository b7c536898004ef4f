package dblock

import (
	"strings"
	"testing"

	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/migrate"
	_ "modernc.org/sqlite"
)

// The trigger's body has a semicolon inside; it is written on one line so
// that splitting at line-ending semicolons keeps it whole, and it renames
// with the table.
func TestSQLiteMigrationStatements(t *testing.T) {
	migs, err := migrate.Load(dialects[SQLite](dialect.Config{Table: "t_abc"}), "t_abc")
	if err != nil || len(migs) == 0 {
		t.Fatalf("migrate.Load = %v, %v", migs, err)
	}
	stmts := migs[0].Statements
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
