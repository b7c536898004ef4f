package mysql

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/dblockhq/dblock/internal/dialect"
)

// A statement that fires a trigger reports 0 as LAST_INSERT_ID in its OK
// packet (MariaDB 10.11 resets it for any trigger, even one that inserts
// nothing), where the lock statements report their token. The history's
// triggers (schema/history/mysql.sql) fire on every change of the lock
// table, so there a statement that changed its row yet reports 0 took
// the key, and its token is read back (Owned, takenBy, readStmts) by the
// memo it gave the row, which is the acquisition's own (a memo without
// Owner is fresh; one with Owner re-enters, keeping the token), while the
// lease it just began is live.
// A lease lost between the statement and the read is not reported as
// taken: its loss is in the history, as for any lease nobody learnt of.
// The session's LAST_INSERT_ID() holds the right value, but the pool may
// not give the next statement the same connection.

// sawTrigger records that triggers fire on the table: from then on a take
// by this process of a row it released reads no token (Take's last).
func (m *mysqlDialect) sawTrigger() {
	if m.triggers != nil && !m.triggers.Load() {
		m.triggers.Store(true)
	}
}

// readStmts are the reads of a token that LAST_INSERT_ID did not report.
type readStmts struct {
	takenBy string // (keys..., memo) → key, token
	txToken string // (key) → token, in the transaction that locked it
	granted string // (ticket, key) → the token a FIFO grant gave
}

func newReadStmts(r, qr *strings.Replacer) readStmts {
	return readStmts{
		takenBy: queries.Get("read.takenBy", r),
		txToken: queries.Get("read.txToken", r),
		granted: queries.Get("read.granted", qr),
	}
}

// takenBy reads which of keys memo holds, and its token.
func (m *mysqlDialect) takenBy(ctx context.Context, q dialect.Querier, keys []string, memo string) (string, int64, bool, error) {
	var key string
	var token int64
	err := q.QueryRowContext(ctx, withKeys(m.reads.takenBy, len(keys)), append(keyArgs(nil, keys), memo)...).Scan(&key, &token)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, false, nil
	}
	return key, token, err == nil, err
}
