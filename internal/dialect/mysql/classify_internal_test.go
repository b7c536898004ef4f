package mysql

import (
	"testing"

	"github.com/dblockhq/dblock/internal/dialect"
	driver "github.com/go-sql-driver/mysql"
)

// TestClassifyGalera: Galera's refusals did nothing and may pass later: a
// certification failure at COMMIT (1213, the losing node) and a node not
// in the primary component (1047, "WSREP has not yet prepared node for
// application use") are RolledBack, retried, never read as held.
func TestClassifyGalera(t *testing.T) {
	m := New(dialect.Config{Table: "t"})
	for _, n := range []uint16{1213, 1047} {
		if got := m.Classify(&driver.MySQLError{Number: n}); got != dialect.RolledBack {
			t.Errorf("Classify(%d) = %v, want RolledBack", n, got)
		}
	}
}
