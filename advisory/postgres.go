package advisory

// postgres implements dialect with PostgreSQL's advisory lock functions on
// the int64 key space (see KeyID). Session and transaction locks on the same
// key conflict with each other.
type postgres struct{}

var _ dialect = postgres{}

var pgTry = [...]string{
	exclusive: `SELECT pg_try_advisory_lock($1)::int`,
	shared:    `SELECT pg_try_advisory_lock_shared($1)::int`,
	xact:      `SELECT pg_try_advisory_xact_lock($1)::int`,
}

// pgWait's statements return 1 from the target list (the lock functions
// return void, which is not null): a function in FROM would run as a
// function scan, which materialises its result, a few microseconds of the
// server's between the grant and the reply.
var pgWait = [...]string{
	exclusive: `SELECT (pg_advisory_lock($1) IS NOT NULL)::int`,
	shared:    `SELECT (pg_advisory_lock_shared($1) IS NOT NULL)::int`,
	xact:      `SELECT (pg_advisory_xact_lock($1) IS NOT NULL)::int`,
}

// pgWaitExec's statements are a session's waits, run as an exec: the
// function returns only once the lock is taken (or fails), so the reply's
// success says so, with no row description or row to decode.
var pgWaitExec = [...]string{
	exclusive: `SELECT pg_advisory_lock($1)`,
	shared:    `SELECT pg_advisory_lock_shared($1)`,
}

// pgUnlock has no xact entry: transaction locks end with the transaction.
var pgUnlock = [...]string{
	exclusive: `SELECT pg_advisory_unlock($1)::int`,
	shared:    `SELECT pg_advisory_unlock_shared($1)::int`,
}

// pgUnlockExec's statements are a session's releases, run as an exec: the
// one-time filter keeps the row only when the function released a hold, so
// the reply's row count ("SELECT 1" or "SELECT 0") says what unlockSQL's
// row would, with no row description or row to decode (and at the
// caller's end of a handoff, the holder's release is on the critical path).
var pgUnlockExec = [...]string{
	exclusive: `SELECT 1 WHERE pg_advisory_unlock($1)`,
	shared:    `SELECT 1 WHERE pg_advisory_unlock_shared($1)`,
}

func (postgres) check(mode) error       { return nil }
func (postgres) arg(key string) any     { return KeyID(key) }
func (postgres) sessionIDSQL() string   { return `SELECT pg_backend_pid()` }
func (postgres) trySQL(m mode) string   { return pgTry[m] }
func (postgres) waitSQL(m mode) string  { return pgWait[m] }
func (postgres) waitArgs(arg any) []any { return []any{arg} }
func (postgres) waitExecSQL(m mode) string {
	if m == xact {
		return "" // a transaction's wait runs through the caller's Tx
	}
	return pgWaitExec[m]
}
func (postgres) unlockSQL(m mode) string { return pgUnlock[m] }
func (postgres) unlockExecSQL(m mode) string {
	if m == xact {
		return ""
	}
	return pgUnlockExec[m]
}
func (postgres) interruptSQL(id int64) (string, []any) {
	return `SELECT pg_cancel_backend($1)`, []any{id}
}
func (postgres) aliveSQL() string {
	return `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`
}
func (postgres) terminateSQL(id int64) (string, []any) {
	return `SELECT pg_terminate_backend($1)`, []any{id}
}
