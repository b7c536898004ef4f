package dberr

import "errors"

// Prepared reports errors that say the server does not have, or already
// has, a statement prepared by name: SQLSTATE 26000 ("prepared statement
// … does not exist") and 42P05 ("… already exists"). A pooler in
// transaction mode that keeps no prepared statement between transactions
// (PgBouncer before 1.21, or without max_prepared_statements) answers so
// to a driver that prepares (pgx's default, cache_statement): the next
// transaction runs on another server connection, or on one where another
// client prepared the same name.
func Prepared(err error) bool {
	s := SQLState(err)
	return s == "26000" || s == "42P05"
}

// PreparedFix is what the error of a statement prepared behind such a
// pooler says to do.
const PreparedFix = "the server keeps no prepared statement for this connection " +
	"(a connection pooler in transaction mode?): put default_query_exec_mode=exec " +
	"in the DSN (pgx), or use session pooling or a direct connection"

// WithPreparedFix returns err, when Prepared, with PreparedFix after its
// text (once however often it is called); any other err as it is.
func WithPreparedFix(err error) error {
	var f *preparedFix
	if !Prepared(err) || errors.As(err, &f) {
		return err
	}
	return &preparedFix{err}
}

// preparedFix is an error of Prepared with PreparedFix.
type preparedFix struct{ err error }

func (f *preparedFix) Error() string { return f.err.Error() + "; " + PreparedFix }
func (f *preparedFix) Unwrap() error { return f.err }
