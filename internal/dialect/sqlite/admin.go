package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// liteInfoCols are the columns scanInfo reads, durations computed with the
// database clock (fixed for the statement). The held-for column is NULL
// (unknown): schema version 1 does not record when a key was taken.
const liteInfoCols = `key_id, memo, depth, token, ` + liteNow + ` - acquired_time, update_time + lease_ms * 1000 - ` + liteNow + `, ` + liteNow + `, data`

func (s *sqliteDialect) adminReplacer() *strings.Replacer {
	return strings.NewReplacer("{t}", s.Quote(s.table), "{cols}", liteInfoCols, "{expired}", liteExpired, "{now}", liteNow)
}

func (s *sqliteDialect) List(ctx context.Context, q dialect.Querier) ([]dialect.Info, error) {
	rows, err := q.QueryContext(ctx, s.adminReplacer().Replace(`SELECT {cols} FROM {t}
WHERE depth > 0 AND NOT ({expired})
ORDER BY key_id`))
	if err != nil {
		return nil, err
	}
	return dialect.ScanInfos(rows)
}

// Owned implements dialect.Dialect.
func (s *sqliteDialect) Owned(ctx context.Context, q dialect.Querier, key, owner string) (int64, bool, error) {
	return dialect.ScanHeldToken(dialect.QueryRow(ctx, q, s.ownedSQL, key, owner))
}

// Get implements dialect.Dialect.
func (s *sqliteDialect) Get(ctx context.Context, q dialect.Querier, key string) (dialect.Info, bool, error) {
	return dialect.ScanOne(q.QueryRowContext(ctx, s.getSQL, key))
}

// SetData implements dialect.Dialect.
func (s *sqliteDialect) SetData(ctx context.Context, q dialect.Querier, key, owner string, token int64, data []byte) (bool, error) {
	return dialect.ExecOne(ctx, q, s.setDataSQL, key, owner, token, data)
}

// ForceRelease releases the live row in place if it is still the
// acquisition read: SQLite's RETURNING shows the row as updated, not as it
// was, and q may be a pool, where no transaction spans two calls.
//
// In a transaction it first takes the file's write lock, with a write that
// changes nothing: a transaction that read first and then wrote would fail
// at its write with SQLITE_BUSY_SNAPSHOT whenever another connection
// committed in between (renewals do, every heartbeat), instead of waiting
// its busy_timeout for the writer as a write at the start does.
func (s *sqliteDialect) ForceRelease(ctx context.Context, q dialect.Querier, key string) (dialect.Info, bool, error) {
	r := s.adminReplacer()
	if _, ok := q.(*sql.Tx); ok {
		if _, err := q.ExecContext(ctx, r.Replace(`UPDATE {t} SET depth = depth WHERE 0`)); err != nil {
			return dialect.Info{}, false, err
		}
	}
	return dialect.ReleaseIfUnchanged(ctx, q, key, s.getSQL,
		r.Replace(`UPDATE {t} SET depth = 0, memo = '', lease_ms = 0, update_time = {now}
WHERE key_id = ?1 AND memo = ?2 AND token = ?3 AND depth = ?4 AND NOT ({expired})`))
}

// Linger shortens the lease of a depth-1 acquisition so that it ends atLeast
// after the acquisition by the host clock SQLite reads; ok is false when that
// moment has passed or the acquisition is no longer live.
func (s *sqliteDialect) Linger(ctx context.Context, q dialect.Querier, key, owner string, token int64, atLeast time.Duration) (bool, error) {
	return dialect.ExecOne(ctx, q, s.adminReplacer().Replace(`UPDATE {t}
SET lease_ms = ?4 - (update_time - acquired_time) / 1000
WHERE key_id = ?1 AND memo = ?2 AND token = ?3 AND depth = 1 AND NOT ({expired})
  AND acquired_time + ?4 * 1000 > {now}`),
		key, owner, token, atLeast.Milliseconds())

}
