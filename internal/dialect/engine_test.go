package dialect_test

import (
	"testing"

	"github.com/dblockhq/dblock/internal/dialect"
)

// TestEngineOf: the version strings these servers report (TiDB's as the
// server built by scripts/tidb.sh reports it; the others as their
// documentation shows them).
func TestEngineOf(t *testing.T) {
	for _, c := range []struct {
		dialect, version string
		want             dialect.Engine
		distributed      bool
	}{
		{dialect.MySQL, "8.0.11-TiDB-v8.4.0-this-is-a-placeholder", dialect.EngineTiDB, true},
		{dialect.MySQL, "8.0.11-TiDB-v7.5.1", dialect.EngineTiDB, true},
		{dialect.MySQL, "10.11.19-MariaDB-0+deb12u1", dialect.EngineMariaDB, false},
		{dialect.MySQL, "8.0.36", dialect.EngineMySQL, false},
		{dialect.Postgres, "PostgreSQL 15.19 (Debian 15.19-0+deb12u1) on x86_64-pc-linux-gnu", dialect.EnginePostgres, false},
		{dialect.Postgres, "CockroachDB CCL v23.2.4 (x86_64-pc-linux-gnu, built 2024/04/03 20:57:22, go1.21.9 X:nocoverageredesign)", dialect.EngineCockroachDB, true},
		{dialect.Postgres, "PostgreSQL 11.2-YB-2.20.1.3-b0 on x86_64-pc-linux-gnu, compiled by clang version 16.0.6", dialect.EngineYugabyteDB, true},
		{dialect.SQLite, "3.46.0", dialect.EngineSQLite, false},
	} {
		got := dialect.EngineOf(c.dialect, c.version)
		if got != c.want || got.Distributed() != c.distributed {
			t.Errorf("EngineOf(%s, %q) = %s (distributed %v), want %s (%v)", c.dialect, c.version, got, got.Distributed(), c.want, c.distributed)
		}
	}
}
