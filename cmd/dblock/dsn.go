package main

import (
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // the embedded default: pure Go, no cgo
)

// sqliteParams make an SQLite file usable by many processes and goroutines:
// WAL, so readers never wait for the writer, and a busy timeout, so a writer
// waits for the file instead of failing.
const sqliteParams = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"

// mysqlDialTimeout bounds connecting to MySQL when the DSN sets no timeout.
const mysqlDialTimeout = 10 * time.Second

// target is a parsed --dsn: which database, how to open it, and how to name
// it in messages without its password.
type target struct {
	dialect  dblock.Dialect
	redacted string // the DSN with its password replaced by xxxxx
	password string // to scrub from anything printed
	pg       *pgx.ConnConfig
	my       *mysql.Config
	lite     string // SQLite driver DSN
}

// parseDSN reads postgres://, postgresql://, mysql:// and sqlite: DSNs. A
// mysql:// URL is translated to go-sql-driver's user:pass@tcp(host:port)/db?params
// form, its user and password URL-unescaped. Errors never contain the
// password.
func parseDSN(dsn string) (target, error) {
	scheme, _, _ := strings.Cut(dsn, ":")
	scheme = strings.ToLower(scheme)
	if scheme == "sqlite" {
		return sqliteTarget(dsn[len("sqlite:"):])
	}
	if scheme != "postgres" && scheme != "postgresql" && scheme != "mysql" {
		return target{}, fmt.Errorf("unsupported DSN %s: want postgres://, postgresql://, mysql:// or sqlite:PATH", redactRaw(dsn))
	}
	u, err := url.Parse(dsn)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the whole URL, password included
		}
		return target{}, fmt.Errorf("malformed DSN %s: %w", redactRaw(dsn), err)
	}
	t := target{redacted: redactURL(u)}
	t.password, _ = u.User.Password()
	if u.Opaque != "" || u.Host == "" {
		if u.Opaque != "" {
			t.redacted = redactRaw(dsn) // scheme:user:password@host has no URL password to hide
		}
		return t, fmt.Errorf("malformed DSN %s: want %s://[user[:password]@]host[:port]/database", t.redacted, scheme)
	}
	if scheme == "mysql" {
		t.dialect = dblock.MySQL
		t.my, err = mysqlConfig(u)
	} else {
		t.dialect = dblock.Postgres
		t.pg, err = pgx.ParseConfig(dsn)
		if err != nil {
			err = errors.New(pgReason(err))
		}
	}
	if err != nil {
		return t, fmt.Errorf("malformed DSN %s: %w", t.redacted, err)
	}
	return t, nil
}

// sqliteTarget reads sqlite:PATH (PATH may start with //, as in a URL).
func sqliteTarget(path string) (target, error) {
	path = strings.TrimPrefix(path, "//")
	t := target{dialect: dblock.SQLite, redacted: "sqlite:" + path}
	switch {
	case path == "":
		return t, errors.New("malformed DSN sqlite: want sqlite:PATH")
	case strings.ContainsAny(path, "?#\x00"):
		return t, fmt.Errorf("malformed DSN %s: the path may not contain ?, # or NUL", t.redacted)
	}
	t.lite = "file:" + path + "?" + sqliteParams
	return t, nil
}

// mysqlConfig translates mysql://user:pass@host:port/db?params.
func mysqlConfig(u *url.URL) (*mysql.Config, error) {
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return nil, errors.New("want one database name after the host")
	}
	port := u.Port()
	if port == "" {
		port = "3306"
	}
	addr := net.JoinHostPort(u.Hostname(), port)
	// No user or password in the string parsed: they may hold any byte.
	base := "tcp(" + addr + ")/" + db
	if u.RawQuery != "" {
		base += "?" + u.RawQuery
	}
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		return nil, err
	}
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Logger = &mysql.NopLogger{} // its logs go to stderr unredacted
	if cfg.Timeout == 0 {
		cfg.Timeout = mysqlDialTimeout
	}
	return cfg, nil
}

// driverDSN returns the DSN in the driver's own form (with the password).
func (t target) driverDSN() string {
	if t.my != nil {
		return t.my.FormatDSN()
	}
	if t.pg != nil {
		return t.pg.ConnString()
	}
	return t.lite
}

// open returns a pool on the target; it does not connect.
func (t target) open() (*sql.DB, error) {
	if t.lite != "" {
		return sql.Open("sqlite", t.lite)
	}
	if t.my != nil {
		c, err := mysql.NewConnector(t.my)
		if err != nil {
			return nil, err
		}
		return sql.OpenDB(c), nil
	}
	return stdlib.OpenDB(*t.pg), nil
}

// redactURL returns u with its password (and any password parameter)
// replaced by xxxxx.
func redactURL(u *url.URL) string {
	r := *u
	if _, ok := r.User.Password(); ok {
		r.User = url.UserPassword(r.User.Username(), "xxxxx")
	}
	if q := r.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		r.RawQuery = q.Encode()
	}
	return r.String()
}

var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

// redactRaw names a DSN that did not parse by its scheme only, since where
// its password ends cannot be known.
func redactRaw(dsn string) string {
	scheme, rest, ok := strings.Cut(dsn, ":")
	switch {
	case !ok || !schemeRE.MatchString(scheme):
		return "(no scheme)"
	case strings.HasPrefix(rest, "//"):
		return scheme + "://…"
	}
	return scheme + ":…"
}

// pgReason keeps what pgx says is wrong, without the connection string it
// repeats (redacted by pgx, but best effort).
func pgReason(err error) string {
	s := err.Error()
	if _, after, ok := strings.Cut(s, "`: "); ok {
		return after
	}
	return s
}
