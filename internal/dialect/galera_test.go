package dialect_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/dialect/mysql"
)

// TestGaleraEngine: a MariaDB Galera node (wsrep_on = ON) is recognised as
// Galera, a distributed engine (portable mode: no named locks, whose
// GET_LOCK holds on one node only or is refused, MDEV-30473); the shared
// MariaDB, without wsrep, stays MariaDB.
func TestGaleraEngine(t *testing.T) {
	dsns := dbtest.GaleraDSNs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, dsn := range dsns {
		e, err := dialect.DetectEngine(ctx, dbtest.OpenMySQL(t, dsn), dialect.MySQL)
		if err != nil || e != dialect.EngineGalera || !e.Distributed() {
			t.Errorf("DetectEngine(%s) = %q (distributed %v), %v; want galera, distributed", dsn, e, e.Distributed(), err)
		}
	}
	e, err := dialect.DetectEngine(ctx, dbtest.OpenMySQL(t, dbtest.DefaultMySQLDSN), dialect.MySQL)
	if err != nil || e == dialect.EngineGalera {
		t.Errorf("DetectEngine(the shared server) = %q, %v; want not galera", e, err)
	}
}

// TestGaleraBellsOff: the MySQL dialect rings no named-lock bells on
// Galera (GET_LOCK's names are one node's; a waiter on another node would
// never hear them): OpenBell answers ErrNoNotify, so waiters poll.
func TestGaleraBellsOff(t *testing.T) {
	dsns := dbtest.GaleraDSNs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := dbtest.OpenMySQL(t, dsns[0])
	table := dbtest.Table(t, db, dblock.MySQL)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	d := mysql.New(dialect.Config{Table: table})
	if _, err := d.(dialect.Bells).OpenBell(ctx, conn); !errors.Is(err, dialect.ErrNoNotify) {
		t.Errorf("OpenBell on Galera: %v, want ErrNoNotify", err)
	}
	// Migrate took the version table's lock row, not GET_LOCK, and made no
	// trigger (portable mode).
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.triggers
		WHERE trigger_schema = DATABASE() AND event_object_table = ?`, table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("Migrate on Galera made %d triggers, want 0 (portable mode)", n)
	}
}

// TestGaleraDoubtful: once a statement has met a Galera node, the MySQL
// dialect doubts acknowledged writes (a holder then counts its lease from
// the renewal before its last); on the shared server it never does.
func TestGaleraDoubtful(t *testing.T) {
	dsns := dbtest.GaleraDSNs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		dsn  string
		want bool
	}{{dsns[0], true}, {dbtest.DefaultMySQLDSN, false}} {
		db := dbtest.OpenMySQL(t, c.dsn)
		table := dbtest.Table(t, db, dblock.MySQL)
		d := mysql.New(dialect.Config{Table: table})
		if d.Doubtful() {
			t.Errorf("%s: Doubtful before any statement", c.dsn)
		}
		if _, _, err := d.Upsert(ctx, db, "doubt", "owner", time.Minute, nil); err != nil {
			t.Fatal(err)
		}
		if got := d.Doubtful(); got != c.want {
			t.Errorf("%s: Doubtful after an acquire = %v, want %v", c.dsn, got, c.want)
		}
	}
}
