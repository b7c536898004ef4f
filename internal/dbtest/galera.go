package dbtest

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"
	"time"
)

// MySQLDSNs returns the DSNs of DBLOCK_MYSQL_DSNS (separated by spaces or
// commas): the nodes of one cluster (scripts/galera.sh starts three), over
// which the fault suite spreads its workers. It is nil when unset.
func MySQLDSNs() []string {
	return strings.FieldsFunc(os.Getenv("DBLOCK_MYSQL_DSNS"), func(r rune) bool { return r == ' ' || r == ',' })
}

// GaleraDSNs returns the DSNs of the MariaDB Galera nodes in
// DBLOCK_GALERA_DSNS (set by scripts/galera.sh check), and skips t when it
// is unset: the Galera tests need that cluster.
func GaleraDSNs(t testing.TB) []string {
	t.Helper()
	dsns := strings.FieldsFunc(os.Getenv("DBLOCK_GALERA_DSNS"), func(r rune) bool { return r == ' ' || r == ',' })
	if len(dsns) == 0 {
		t.Skip("no Galera cluster: DBLOCK_GALERA_DSNS is unset (scripts/galera.sh check sets it)")
	}
	return dsns
}

// OpenMySQL opens a MySQL pool at dsn, fails the test if the server does
// not answer, and closes the pool when the test ends.
func OpenMySQL(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatalf("dbtest: open %s: %v", dsn, err)
	}
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("dbtest: %s is not reachable: %v", dsn, err)
	}
	return db
}
