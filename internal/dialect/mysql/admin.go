package mysql

import (
	"context"
	"strings"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// myInfoCols are the columns scanInfo reads, durations computed with the
// server's clock (UTC_TIMESTAMP is fixed for the whole statement).
const myInfoCols = `key_id, memo, depth, token,
  TIMESTAMPDIFF(MICROSECOND, acquired_time, UTC_TIMESTAMP(6)),
  TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), update_time + INTERVAL lease_ms * 1000 MICROSECOND),
  TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)), data`

func (m *mysqlDialect) adminReplacer() *strings.Replacer {
	return strings.NewReplacer("{t}", m.Quote(m.table), "{cols}", myInfoCols, "{expired}", myExpired)
}

func (m *mysqlDialect) List(ctx context.Context, q dialect.Querier) ([]dialect.Info, error) {
	rows, err := q.QueryContext(ctx, m.adminReplacer().Replace(`SELECT {cols} FROM {t}
WHERE depth > 0 AND NOT ({expired})
ORDER BY key_id`))
	if err != nil {
		return nil, err
	}
	return dialect.ScanInfos(rows)
}

// Owned implements dialect.Dialect.
func (m *mysqlDialect) Owned(ctx context.Context, q dialect.Querier, key, owner string) (int64, bool, error) {
	return dialect.ScanHeldToken(dialect.QueryRow(ctx, q, m.ownedSQL, key, owner))
}

// Get implements dialect.Dialect.
func (m *mysqlDialect) Get(ctx context.Context, q dialect.Querier, key string) (dialect.Info, bool, error) {
	return dialect.ScanOne(q.QueryRowContext(ctx, m.getSQL, key))
}

// SetData implements dialect.Dialect. A value equal to the one the row has
// changes nothing, which the driver counts as no row: a read then tells.
func (m *mysqlDialect) SetData(ctx context.Context, q dialect.Querier, key, owner string, token int64, data []byte) (bool, error) {
	ok, err := dialect.ExecOne(ctx, q, m.setDataSQL, data, key, owner, token)
	if ok || err != nil {
		return ok, err
	}
	return dialect.RowExists(ctx, q, m.liveSQL, key, owner, token)
}

// ForceRelease releases the live row in place if it is still the
// acquisition read (MySQL has no UPDATE ... RETURNING).
func (m *mysqlDialect) ForceRelease(ctx context.Context, q dialect.Querier, key string) (info dialect.Info, ok bool, err error) {
	if m, err = m.on(ctx, q); err != nil {
		return info, false, err
	}
	r := m.adminReplacer()
	err = m.record(ctx, q, []string{key}, func(q dialect.Querier) (err error) {
		info, ok, err = dialect.ReleaseIfUnchanged(ctx, q, key, m.getSQL,
			r.Replace(`UPDATE {t} SET memo = '', lease_ms = 0, update_time = UTC_TIMESTAMP(6), depth = 0
WHERE key_id = ? AND memo = ? AND token = ? AND depth = ? AND NOT ({expired})`))
		return err
	})
	return info, ok, err
}

// Linger shortens the lease of a depth-1 acquisition so that it ends atLeast
// after the acquisition by the server's clock; ok is false when that moment
// has passed or the acquisition is no longer live. A lease that already
// has that length leaves the row unchanged, which the driver reports as no
// row affected (without clientFoundRows): a read then tells whether the
// acquisition matched.
func (m *mysqlDialect) Linger(ctx context.Context, q dialect.Querier, key, owner string, token int64, atLeast time.Duration) (bool, error) {
	ms := atLeast.Milliseconds()
	r := m.adminReplacer()
	ok, err := dialect.ExecOne(ctx, q, r.Replace(`UPDATE {t}
SET lease_ms = ? - FLOOR(TIMESTAMPDIFF(MICROSECOND, acquired_time, update_time) / 1000)
WHERE `+myLingerWhere), ms, key, owner, token, ms)
	if ok || err != nil {
		return ok, err
	}
	return dialect.RowExists(ctx, q, r.Replace(`SELECT 1 FROM {t} WHERE `+myLingerWhere), key, owner, token, ms)
}

// myLingerWhere matches a live depth-1 acquisition (key, memo, token) whose
// lingering lease (ms from its acquisition) has not ended.
const myLingerWhere = `key_id = ? AND memo = ? AND token = ? AND depth = 1 AND NOT ({expired})
  AND acquired_time + INTERVAL ? * 1000 MICROSECOND > UTC_TIMESTAMP(6)`
