package dberr

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestWithPreparedFix(t *testing.T) {
	lost := &pgconn.PgError{Code: "26000", Message: `prepared statement "stmt_1" does not exist`}
	dup := &pgconn.PgError{Code: "42P05", Message: `prepared statement "stmtcache_1" already exists`}
	other := &pgconn.PgError{Code: "42P01", Message: `relation "t" does not exist`}
	for _, err := range []error{lost, fmt.Errorf("acquire: %w", dup)} {
		got := WithPreparedFix(err)
		if !errors.Is(got, err) || !Prepared(got) {
			t.Errorf("WithPreparedFix(%v) = %v: no longer wraps it", err, got)
		}
		if n := strings.Count(WithPreparedFix(Errorf("dblock: get: %w", got)).Error(), "default_query_exec_mode=exec"); n != 1 {
			t.Errorf("%q: the fix said %d times, want once", got, n)
		}
	}
	if got := WithPreparedFix(other); got != error(other) {
		t.Errorf("WithPreparedFix(%v) = %v, want it unchanged", other, got)
	}
	if WithPreparedFix(nil) != nil {
		t.Error("WithPreparedFix(nil) is not nil")
	}
}
