package dblock_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// unknownDriver is a driver dblock cannot recognise; it is never connected.
type unknownDriver struct{}

func (unknownDriver) Open(string) (driver.Conn, error) { return nil, errors.New("not a database") }

func init() { sql.Register("dblock-unknown", unknownDriver{}) }

// Every bad input gets an error naming the problem and wrapping a sentinel,
// before any SQL is sent.
func TestBadInputs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		l, db, _ := dbtest.Locker(t, d)
		ctx := ctxT(t, 30*time.Second)
		unknown, _ := sql.Open("dblock-unknown", "")
		defer unknown.Close() // its connection opener goroutine
		newErr := func(db *sql.DB, opts ...dblock.Option) error {
			_, err := dblock.New(db, opts...)
			return err
		}
		other := map[dblock.Dialect]dblock.Dialect{dblock.Postgres: dblock.SQLite, dblock.MySQL: dblock.Postgres, dblock.SQLite: dblock.MySQL}[d]
		tryErr := func(key string, opts ...dblock.LockOption) error {
			lk, err := l.TryLock(ctx, key, opts...)
			if err == nil {
				_ = lk.Unlock(ctx)
			}
			return err
		}
		cases := []struct {
			name string
			err  error
			want error
		}{
			{"nil db", newErr(nil), dblock.ErrInvalidOption},
			{"empty table", newErr(db, dblock.WithTable("")), dblock.ErrInvalidOption},
			{"table starting with a digit", newErr(db, dblock.WithTable("1locks")), dblock.ErrInvalidOption},
			{"table with a dash", newErr(db, dblock.WithTable("lock-table")), dblock.ErrInvalidOption},
			{"table with SQL", newErr(db, dblock.WithTable("t; DROP TABLE users; --")), dblock.ErrInvalidOption},
			{"table with a quote", newErr(db, dblock.WithTable(`t"x`)), dblock.ErrInvalidOption},
			{"table with a backtick", newErr(db, dblock.WithTable("t`x")), dblock.ErrInvalidOption},
			{"schema-qualified table", newErr(db, dblock.WithTable("public.locks")), dblock.ErrInvalidOption},
			{"non-ASCII table", newErr(db, dblock.WithTable("tâble")), dblock.ErrInvalidOption},
			{"table too long", newErr(db, dblock.WithTable(strings.Repeat("a", dblock.MaxTableLen+1))), dblock.ErrInvalidOption},
			{"zero TTL", newErr(db, dblock.WithTTL(0)), dblock.ErrInvalidOption},
			{"negative TTL", newErr(db, dblock.WithTTL(-time.Second)), dblock.ErrInvalidOption},
			{"TTL below MinTTL", newErr(db, dblock.WithTTL(time.Nanosecond)), dblock.ErrInvalidOption},
			{"TTL above MaxTTL", newErr(db, dblock.WithTTL(dblock.MaxTTL+1)), dblock.ErrInvalidOption},
			{"zero heartbeat", newErr(db, dblock.WithHeartbeat(0)), dblock.ErrInvalidOption},
			{"heartbeat of a nanosecond", newErr(db, dblock.WithHeartbeat(time.Nanosecond)), dblock.ErrInvalidOption},
			{"heartbeat below a millisecond", newErr(db, dblock.WithHeartbeat(time.Millisecond-1)), dblock.ErrInvalidOption},
			{"heartbeat above TTL/2", newErr(db, dblock.WithTTL(30*time.Second), dblock.WithHeartbeat(16*time.Second)), dblock.ErrInvalidOption},
			{"nil logger", newErr(db, dblock.WithLogger(nil)), dblock.ErrInvalidOption},
			{"unknown dialect name", newErr(db, dblock.WithDialect("oracle")), dblock.ErrInvalidOption},
			{"dialect not the driver's", newErr(db, dblock.WithDialect(other)), dblock.ErrInvalidOption},
			{"Migrate with a dialect not the driver's", dblock.Migrate(ctx, db, dblock.WithTable(dbtest.TableName()), dblock.WithDialect(other)), dblock.ErrInvalidOption},
			{"bad retry bounds", newErr(db, dblock.WithRetry(time.Second, time.Millisecond)), dblock.ErrInvalidOption},
			{"nil option", newErr(db, nil), dblock.ErrInvalidOption},
			{"unrecognised driver", newErr(unknown), dblock.ErrUnknownDialect},
			{"empty key", tryErr(""), dblock.ErrInvalidKey},
			{"key with NUL", tryErr("a\x00b"), dblock.ErrInvalidKey},
			{"key not UTF-8", tryErr("\xff\xfe"), dblock.ErrInvalidKey},
			{"key too long", tryErr(strings.Repeat("k", dblock.MaxKeyLen+1)), dblock.ErrInvalidKey},
			{"key too long in bytes (multi-byte runes)", tryErr(strings.Repeat("é", 128)), dblock.ErrInvalidKey},
			{"empty owner", tryErr("k", dblock.Owner("")), dblock.ErrInvalidKey},
			{"owner too long", tryErr("k", dblock.Owner(strings.Repeat("o", dblock.MaxOwnerLen+1))), dblock.ErrInvalidKey},
			{"zero lock TTL", tryErr("k", dblock.TTL(0)), dblock.ErrInvalidOption},
			{"nil lock option", tryErr("k", nil), dblock.ErrInvalidOption},
			{"nil Do function", l.Do(ctx, "k", nil), dblock.ErrInvalidOption},
		}
		for _, c := range cases {
			if !errors.Is(c.err, c.want) {
				t.Errorf("%s: got %v, want %v", c.name, c.err, c.want)
				continue
			}
			t.Logf("%-42s -> %v", c.name, c.err)
		}
		// The longest valid key, and keys full of SQL, quotes and Unicode, are
		// plain values.
		for _, key := range []string{strings.Repeat("k", dblock.MaxKeyLen), "'; DROP TABLE x; --", `"quoted" \ back\slash`, "ключ-🔒", "Case", "case", "pad ", "pad"} {
			lk, err := l.TryLock(ctx, key)
			if err != nil {
				t.Errorf("valid key %q: %v", key, err)
				continue
			}
			defer lk.Unlock(ctx)
		}
	})
}

// A database that is missing or has no lock table gets a clear error, not a
// hang and not ErrLocked.
func TestDeadDatabaseAndMissingSchema(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, 30*time.Second)
		var dsn string
		switch d {
		case dblock.Postgres:
			dsn = "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2"
		case dblock.MySQL:
			dsn = "root@tcp(127.0.0.1:1)/test?timeout=2s"
		case dblock.SQLite: // a file in a directory that does not exist
			dsn = dbtest.SQLiteDSN(filepath.Join(t.TempDir(), "missing", "locks.db"))
		}
		dead, err := sql.Open(dbtest.DriverName(d), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer dead.Close()
		l, err := dblock.New(dead)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		_, err = l.TryLock(ctx, "k")
		if err == nil || errors.Is(err, dblock.ErrLocked) {
			t.Fatalf("TryLock on a dead database = %v", err)
		}
		t.Logf("dead database -> %v", err)
		if err := dblock.Migrate(ctx, dead); err == nil {
			t.Fatal("Migrate on a dead database succeeded")
		} else {
			t.Logf("Migrate on a dead database -> %v", err)
		}

		db := dbtest.Open(t, d)
		nl, err := dblock.New(db, dblock.WithTable(dbtest.TableName()))
		if err != nil {
			t.Fatal(err)
		}
		defer nl.Close()
		if _, err := nl.TryLock(ctx, "k"); !errors.Is(err, dblock.ErrNoSchema) {
			t.Fatalf("TryLock without a table = %v, want ErrNoSchema", err)
		} else {
			t.Logf("missing table -> %v", err)
		}
		if _, err := nl.Lock(context.Background(), "k"); !errors.Is(err, dblock.ErrNoSchema) {
			t.Fatalf("Lock without a table = %v, want ErrNoSchema (and no wait)", err)
		}
		// The calls on no key say so, not an empty key: they said
		// `list ""` and `reap ""`.
		if _, err := nl.List(ctx); !errors.Is(err, dblock.ErrNoSchema) || strings.Contains(err.Error(), `""`) {
			t.Errorf("List without a table = %v, want ErrNoSchema, naming no key", err)
		}
		if _, err := nl.Reap(ctx); !errors.Is(err, dblock.ErrNoSchema) || strings.Contains(err.Error(), `""`) {
			t.Errorf("Reap without a table = %v, want ErrNoSchema, naming no key", err)
		}
		// A shared key's rows are named as what they are, not by their
		// keys in the table ("acquire "rw/k/r/54"").
		if _, err := nl.RLock(ctx, "k"); !errors.Is(err, dblock.ErrNoSchema) || strings.Contains(err.Error(), "rw/") || !strings.Contains(err.Error(), `of "k"`) {
			t.Errorf("RLock without a table = %v, want ErrNoSchema, naming a reader of k", err)
		}
		if _, err := nl.WLock(ctx, "k"); !errors.Is(err, dblock.ErrNoSchema) || strings.Contains(err.Error(), "rw/") || !strings.Contains(err.Error(), `writer of "k"`) {
			t.Errorf("WLock without a table = %v, want ErrNoSchema, naming the writer of k", err)
		}
	})
}
