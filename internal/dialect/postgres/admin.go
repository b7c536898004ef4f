package postgres

import (
	"context"
	"strings"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// pgInfoCols are the columns scanInfo reads, durations computed with the
// server's clock.
const pgInfoCols = `l.key_id, l.memo, l.depth, l.token,
  (EXTRACT(EPOCH FROM (statement_timestamp() - l.acquired_time)) * 1000000)::bigint AS held_us,
  (EXTRACT(EPOCH FROM (l.update_time + l.lease_ms * interval '1 millisecond' - statement_timestamp())) * 1000000)::bigint AS expires_us,
  (EXTRACT(EPOCH FROM statement_timestamp()) * 1000000)::bigint AS now_us, l.data`

func (p *postgres) adminReplacer() *strings.Replacer {
	return strings.NewReplacer("{t}", p.Quote(p.table), "{cols}", pgInfoCols, "{expired}", pgExpired)
}

func (p *postgres) List(ctx context.Context, q dialect.Querier) ([]dialect.Info, error) {
	rows, err := q.QueryContext(ctx, p.adminReplacer().Replace(`SELECT {cols} FROM {t} AS l
WHERE l.depth > 0 AND NOT ({expired})
ORDER BY l.key_id COLLATE "C"`))
	if err != nil {
		return nil, err
	}
	return dialect.ScanInfos(rows)
}

// Owned implements dialect.Dialect.
func (p *postgres) Owned(ctx context.Context, q dialect.Querier, key, owner string) (int64, bool, error) {
	return dialect.ScanHeldToken(dialect.QueryRow(ctx, q, p.ownedSQL, key, owner))
}

// Get implements dialect.Dialect.
func (p *postgres) Get(ctx context.Context, q dialect.Querier, key string) (dialect.Info, bool, error) {
	return dialect.ScanOne(q.QueryRowContext(ctx, p.getSQL, key))
}

// SetData implements dialect.Dialect.
func (p *postgres) SetData(ctx context.Context, q dialect.Querier, key, owner string, token int64, data []byte) (bool, error) {
	return dialect.ExecOne(ctx, q, p.setDataSQL, key, owner, token, data)
}

// ForceRelease locks the live row, then releases it in place, in one
// statement, returning what the row held before.
func (p *postgres) ForceRelease(ctx context.Context, q dialect.Querier, key string) (dialect.Info, bool, error) {
	row := q.QueryRowContext(ctx, p.adminReplacer().Replace(`WITH old AS (
  SELECT {cols} FROM {t} AS l
  WHERE l.key_id = $1 AND l.depth > 0 AND NOT ({expired})
  FOR UPDATE)
UPDATE {t} AS l SET depth = 0, memo = '', lease_ms = 0, update_time = statement_timestamp()
FROM old WHERE l.key_id = old.key_id
RETURNING old.key_id, old.memo, old.depth, old.token, old.held_us, old.expires_us, old.now_us, old.data`), key)
	return dialect.ScanOne(row)
}

// Linger shortens the lease of a depth-1 acquisition so that it ends atLeast
// after the acquisition by the server's clock; ok is false when that moment
// has passed or the acquisition is no longer live.
func (p *postgres) Linger(ctx context.Context, q dialect.Querier, key, owner string, token int64, atLeast time.Duration) (bool, error) {
	return dialect.ExecOne(ctx, q, p.adminReplacer().Replace(`UPDATE {t} AS l
SET lease_ms = $4::bigint - FLOOR(EXTRACT(EPOCH FROM (l.update_time - l.acquired_time)) * 1000)::bigint
WHERE l.key_id = $1 AND l.memo = $2 AND l.token = $3 AND l.depth = 1 AND NOT ({expired})
  AND l.acquired_time + $4::bigint * interval '1 millisecond' > statement_timestamp()`),
		key, owner, token, atLeast.Milliseconds())

}
