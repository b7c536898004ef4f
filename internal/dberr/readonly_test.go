package dberr

import (
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// A server that takes no writes is a lost connection's kind: transient,
// and a Conn error.
func TestReadOnly(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "25006", Message: "cannot execute UPDATE in a read-only transaction"}, true},
		{fmt.Errorf("acquire: %w", &mysql.MySQLError{Number: 1290, Message: "running with the --read-only option"}), true},
		{&mysql.MySQLError{Number: 1792, Message: "Cannot execute statement in a READ ONLY transaction"}, true},
		{&mysql.MySQLError{Number: 1836, Message: "Running in read-only mode"}, true},
		{&pgconn.PgError{Code: "25P02"}, false},
		{&mysql.MySQLError{Number: 1146}, false},
		{nil, false},
	} {
		if got := ReadOnly(tc.err); got != tc.want {
			t.Errorf("ReadOnly(%v) = %v, want %v", tc.err, got, tc.want)
		}
		if tc.want && (!Conn(tc.err) || !Transient(tc.err)) {
			t.Errorf("%v: Conn %v, Transient %v, want both", tc.err, Conn(tc.err), Transient(tc.err))
		}
	}
}
