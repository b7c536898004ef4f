package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// MigrateLock takes a session advisory lock or, in portable mode or
// behind a connection pooler, the version table's lock row. Behind a
// pooler in transaction mode the advisory lock and its unlock can run on
// two server connections: the lock then stays with a server connection of
// the pooler's, and every later Migrate on another one waits for it until
// that connection closes. The row lock is plain statements, each on its
// own.
func (p *postgres) MigrateLock(ctx context.Context, conn *sql.Conn, name string) (func() error, error) {
	v, err := p.on(ctx, conn)
	if err != nil {
		return nil, err
	}
	pooled := false
	if !v.portable {
		if pooled, err = dialect.BehindPooler(ctx, conn); err != nil {
			return nil, err
		}
	}
	if v.portable || pooled {
		vt := p.Quote(p.table + "_version")
		return dialect.RowMigrateLock(ctx, conn, dialect.RowLockSQL{
			Create:  p.versionDDL,
			Take:    `INSERT INTO ` + vt + ` (version) VALUES (-1) ON CONFLICT (version) DO NOTHING`,
			Stale:   `DELETE FROM ` + vt + ` WHERE version = -1 AND applied_at < statement_timestamp() - interval '` + fmt.Sprint(int(dialect.StaleAfter.Seconds())) + ` seconds'`,
			Release: `DELETE FROM ` + vt + ` WHERE version = -1`,
			Retry:   func(err error) bool { return p.Classify(err) == dialect.RolledBack },
		})
	}
	key := advisoryKey("dblock.migrate:" + name)
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		return nil, err
	}
	return func() error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, err := conn.ExecContext(ctx, `SELECT pg_advisory_unlock($1)`, key)
		return err
	}, nil
}

// advisoryKey maps one of dblock's own advisory lock names to a key: FNV-1a
// 64 of the name. The names start with "dblock.", so they do not meet the
// keys of package advisory (SHA-256 of the user's key) except by a 2^-64
// chance.
func advisoryKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int64(h.Sum64())
}
