package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

var _ dialect.Bells = (*mysqlDialect)(nil)

// bellCount is how many bell names a bell session rings through: it takes
// the next before it releases the one it holds, so a waiter that woke on
// one finds the next held, and a waiter slow to let go of the one before
// does not stop the ring.
const bellCount = 3

// keyNameSQL is the named lock of a key (its argument: keyArg): the
// database, table and key hashed, so that the name fits MySQL's 64
// characters and never collides across databases or tables.
const keyNameSQL = `CONCAT('dblock-k-', LEFT(SHA2(CONCAT(IFNULL(DATABASE(), ''), '/', ?), 256), 40))`

// keyArg is keyNameSQL's argument for key: the table's name, by length,
// then the key.
func (m *mysqlDialect) keyArg(key string) string {
	return strconv.Itoa(len(m.table)) + ":" + m.table + "/" + key
}

// bellName names bell i of session id; session ids are unique on a server.
func bellName(id int64, i int) string {
	return "dblock-bell-" + strconv.FormatInt(id, 10) + "-" + strconv.Itoa(i)
}

// bellsOn returns the dialect for the server, or an error wrapping
// ErrNoNotify when bells are not for it.
func (m *mysqlDialect) bellsOn(ctx context.Context, q dialect.Querier) (*mysqlDialect, error) {
	m, err := m.on(ctx, q)
	if err != nil {
		return nil, err
	}
	if m.tidb || m.portable { // portable also on Galera
		return nil, fmt.Errorf("%w: no named-lock bells on TiDB, on Galera or in portable mode", dialect.ErrNoNotify)
	}
	return m, nil
}

// OpenBell implements dialect.Bells. A server that keeps one named lock
// per session (MySQL before 5.7) gives up the first lock at the second
// GET_LOCK: the probe sees it.
func (m *mysqlDialect) OpenBell(ctx context.Context, s dialect.Querier) (int64, error) {
	if _, err := m.bellsOn(ctx, s); err != nil {
		return 0, err
	}
	var id int64
	if err := s.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		return 0, err
	}
	bell, probe := bellName(id, 0), bellName(id, bellCount)
	var got, both sql.NullInt64
	err := s.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0), IF(GET_LOCK(?, 0) = 1, IS_USED_LOCK(?) = CONNECTION_ID() AND RELEASE_LOCK(?) = 1, 0)",
		bell, probe, bell, probe).Scan(&got, &both)
	switch {
	case err != nil:
		return 0, err
	case got.Int64 != 1:
		return 0, fmt.Errorf("dblock: the bell %s is taken", bell)
	case both.Int64 != 1:
		return 0, fmt.Errorf("%w: the server keeps one named lock per session", dialect.ErrNoNotify)
	}
	return id, nil
}

// UpdateBells implements dialect.Bells.
func (m *mysqlDialect) UpdateBells(ctx context.Context, s dialect.Querier, id int64, hold, free []string, ring bool, cur int) ([]bool, int, error) {
	var b strings.Builder
	args := make([]any, 0, len(hold)+len(free)+2)
	b.WriteString("SELECT 1")
	for _, k := range hold {
		b.WriteString(", GET_LOCK(" + keyNameSQL + ", 0)")
		args = append(args, m.keyArg(k))
	}
	for _, k := range free {
		b.WriteString(", RELEASE_LOCK(" + keyNameSQL + ")")
		args = append(args, m.keyArg(k))
	}
	next := (cur + 1) % bellCount
	if ring {
		// The next bell is taken first: a waiter woken by the release of
		// cur finds it held. A waiter still holding it (woken two rings
		// ago) lets go within a round trip; past a second the ring fails.
		b.WriteString(", IF(GET_LOCK(?, 1) = 1, RELEASE_LOCK(?), NULL)")
		args = append(args, bellName(id, next), bellName(id, cur))
	}
	vals := make([]sql.NullInt64, 1+len(hold)+len(free)+btoi(ring))
	dest := make([]any, len(vals))
	for i := range vals {
		dest[i] = &vals[i]
	}
	if err := s.QueryRowContext(ctx, b.String(), args...).Scan(dest...); err != nil {
		return nil, cur, err
	}
	held := make([]bool, len(hold))
	for i := range hold {
		held[i] = vals[1+i].Int64 == 1
	}
	if ring && vals[len(vals)-1].Valid {
		cur = next
	}
	return held, cur, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Holders implements dialect.Bells.
func (m *mysqlDialect) Holders(ctx context.Context, q dialect.Querier, keys []string) ([]int64, error) {
	m, err := m.bellsOn(ctx, q)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, nil
	}
	args := make([]any, pow2(len(keys))) // padded, as HeldKeys's
	for i := range args {
		args[i] = m.keyArg(keys[min(i, len(keys)-1)])
	}
	ids, err := usedBy(ctx, q, "IS_USED_LOCK("+keyNameSQL+")", args)
	if err != nil {
		return nil, err
	}
	return ids[:len(keys)], nil
}

// BellIndex implements dialect.Bells.
func (m *mysqlDialect) BellIndex(ctx context.Context, q dialect.Querier, ids []int64) ([]int, error) {
	args := make([]any, 0, bellCount*len(ids))
	for _, id := range ids {
		for i := range bellCount {
			args = append(args, bellName(id, i))
		}
	}
	used, err := usedBy(ctx, q, "IS_USED_LOCK(?)", args)
	if err != nil {
		return nil, err
	}
	idx := make([]int, len(ids))
	for j, id := range ids {
		idx[j] = heldBell(id, used[bellCount*j:][:bellCount])
	}
	return idx, nil
}

// heldBell picks, of the bells that session id holds (used: each bell's
// holder), the one it rings next: the one whose predecessor it does not
// hold; -1 when it holds none.
func heldBell(id int64, used []int64) int {
	for i := range bellCount {
		if used[i] == id && used[(i+bellCount-1)%bellCount] != id {
			return i
		}
	}
	if used[0] == id {
		return 0
	}
	return -1
}

// usedBy runs one read of expr for each of args and returns the session
// ids it gives (0 for NULL).
func usedBy(ctx context.Context, q dialect.Querier, expr string, args []any) ([]int64, error) {
	if len(args) == 0 {
		return nil, nil
	}
	vals := make([]sql.NullInt64, len(args))
	dest := make([]any, len(args))
	for i := range vals {
		dest[i] = &vals[i]
	}
	query := "SELECT " + strings.TrimSuffix(strings.Repeat(expr+", ", len(args)), ", ")
	if err := q.QueryRowContext(ctx, query, args...).Scan(dest...); err != nil {
		return nil, err
	}
	ids := make([]int64, len(vals))
	for i, v := range vals {
		ids[i] = v.Int64
	}
	return ids, nil
}

// WaitBell implements dialect.Bells.
func (m *mysqlDialect) WaitBell(ctx context.Context, s dialect.Querier, id int64, i int, timeout time.Duration) (bool, error) {
	bell := bellName(id, i)
	var got sql.NullInt64
	secs := max(int64(timeout/time.Second), 1)
	if err := s.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", bell, secs).Scan(&got); err != nil {
		return false, err
	}
	switch {
	case !got.Valid:
		return false, fmt.Errorf("dblock: waiting for the bell %s failed", bell)
	case got.Int64 == 0:
		return false, nil
	}
	_, err := s.ExecContext(ctx, "DO RELEASE_LOCK(?)", bell)
	return true, err
}
