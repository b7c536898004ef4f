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
	litePath string // SQLite file
}

// parseDSN reads postgres://, postgresql://, mysql:// and sqlite: DSNs, and
// go-sql-driver's own user:pass@tcp(host:port)/db?params form (or unix(PATH)),
// to which a mysql:// URL is translated, its user and password
// URL-unescaped. Errors never contain the password.
func parseDSN(dsn string) (target, error) {
	scheme, rest, _ := strings.Cut(dsn, ":")
	scheme = strings.ToLower(scheme)
	urlScheme := scheme == "postgres" || scheme == "postgresql" || scheme == "mysql"
	switch {
	case scheme == "sqlite":
		return sqliteTarget(dsn[len("sqlite:"):])
	case mysqlNativeRE.MatchString(dsn) && !(urlScheme && strings.HasPrefix(rest, "//")):
		return mysqlNativeTarget(dsn)
	}
	if !urlScheme {
		return target{}, fmt.Errorf("unsupported DSN %s: want postgres://, postgresql://, mysql://, sqlite:PATH or user:password@tcp(host:port)/database", redactRaw(dsn))
	}
	if strings.Count(dsn, "@") > 1 {
		// An @ left unescaped in a password: the URL parser and the
		// driver split the DSN at different @s, and the driver's errors
		// then showed what lay after the first as a host.
		return target{}, fmt.Errorf("malformed DSN %s: more than one @ (write an @ in a user name, password or parameter as %%40)", redactRaw(dsn))
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return target{}, fmt.Errorf("malformed DSN %s: %s", redactRaw(dsn), reason(err))
	}
	t := target{redacted: redactURL(u)}
	t.password, _ = u.User.Password()
	if u.Opaque != "" || u.Host == "" {
		// Without a host, where a password sits is a guess (scheme:user:pw@h
		// is opaque; scheme:#&password=pw is a fragment): name the scheme only.
		t.redacted = redactRaw(dsn)
		return t, fmt.Errorf("malformed DSN %s: want %s://[user[:password]@]host[:port]/database", t.redacted, scheme)
	}
	if !hostRE.MatchString(u.Host) {
		// url.Parse lets a host hold & and =, so a DSN missing its ? (as in
		// postgres://h&password=pw) would show its password as the host.
		t.redacted = redactRaw(dsn)
		return t, fmt.Errorf("malformed DSN %s: the host may hold only letters, digits and - . _ ~ %% : [ ] ,", t.redacted)
	}
	if scheme == "mysql" {
		t.dialect = dblock.MySQL
		t.my, err = mysqlConfig(u)
	} else {
		t.dialect = dblock.Postgres
		t.pg, err = pgx.ParseConfig(dsn)
	}
	if err != nil {
		return t, fmt.Errorf("malformed DSN %s: %s", t.redacted, reason(err))
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
	t.lite, t.litePath = "file:"+path+"?"+sqliteParams, path
	return t, nil
}

// mysqlNativeRE matches go-sql-driver's DSN form: [user[:password]@]
// followed by a network and its address, as in tcp(127.0.0.1:3306)/db.
var mysqlNativeRE = regexp.MustCompile(`(?:^|@)(?:tcp|tcp4|tcp6|unix)\(`)

// mysqlNativeTarget reads go-sql-driver's own DSN form,
// [user[:password]@]tcp(host:port)/db[?params], with mysql.ParseDSN.
func mysqlNativeTarget(dsn string) (target, error) {
	t := target{dialect: dblock.MySQL, redacted: redactRaw(dsn)}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		// The driver's rule: the password runs from the first : to the
		// last @ before the last /.
		if at := strings.LastIndex(dsn[:max(strings.LastIndex(dsn, "/"), 0)], "@"); at > 0 {
			_, t.password, _ = strings.Cut(dsn[:at], ":")
		}
		return t, fmt.Errorf("malformed DSN %s: %s (want [user[:password]@]tcp(host:port)/database[?params])", t.redacted, reason(err))
	}
	t.password = cfg.Passwd
	if cfg.DBName == "" {
		return t, fmt.Errorf("malformed DSN %s: want one database name after the address", t.redacted)
	}
	shown := cfg.Clone()
	if shown.Passwd != "" {
		shown.Passwd = "xxxxx"
	}
	base, query, _ := strings.Cut(shown.FormatDSN(), "?")
	t.redacted = base
	if query != "" {
		t.redacted += "?" + redactQuery(query)
	}
	if err := checkPort(cfg); err != nil {
		return t, fmt.Errorf("malformed DSN %s: %v", t.redacted, err)
	}
	cfg.Logger = &mysql.NopLogger{} // its logs go to stderr unredacted
	if cfg.Timeout == 0 {
		cfg.Timeout = mysqlDialTimeout
	}
	t.my = cfg
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
	if err := checkPort(cfg); err != nil {
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

// checkPort refuses a TCP address whose port no server can listen on (0,
// above 65535, or not a number or a service's name): the driver would
// only find it out when dialling, and dblock report the server as
// unreachable (69) instead of the DSN as wrong (78), as pgx's parser does
// for a postgres:// URL.
func checkPort(cfg *mysql.Config) error {
	if !strings.HasPrefix(cfg.Net, "tcp") {
		return nil // unix(PATH)
	}
	_, port, err := net.SplitHostPort(cfg.Addr) // the driver added :3306 if none was given
	if err != nil {
		return fmt.Errorf("bad address: %s", reason(err))
	}
	if n, err := net.LookupPort(cfg.Net, port); err != nil || n == 0 {
		return fmt.Errorf("invalid port %s: want 1 to 65535", port)
	}
	return nil
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

// redactURL returns u with its password, any password parameter, and a user
// or database name that holds "password" replaced by xxxxx, and without its
// fragment, which no driver reads and which may hold anything.
func redactURL(u *url.URL) string {
	r := *u
	r.Fragment, r.RawFragment = "", ""
	if _, ok := r.User.Password(); ok {
		r.User = url.UserPassword(r.User.Username(), "xxxxx")
	}
	r.RawQuery = redactQuery(r.RawQuery)
	// A DSN missing its ? (postgres://h/db&password=pw) puts its password
	// parameter in the database name, or before the @ in the user name.
	if strings.Contains(strings.ToLower(r.Path), "password") {
		r.Path, r.RawPath = "/xxxxx", ""
	}
	if strings.Contains(strings.ToLower(r.User.Username()), "password") {
		if _, ok := r.User.Password(); ok {
			r.User = url.UserPassword("xxxxx", "xxxxx")
		} else {
			r.User = url.User("xxxxx")
		}
	}
	return r.String()
}

// redactQuery replaces the value of every parameter that holds "password"
// (in any case, escaped or not, in its name or, as in a=b;password=pw or
// =?password=pw, in its value) by xxxxx. It splits the query itself, since
// url.ParseQuery drops a pair it cannot read (one holding a ; or a bad
// escape) and would leave that pair's password in place.
func redactQuery(raw string) string {
	if raw == "" {
		return raw
	}
	pairs := strings.Split(raw, "&")
	for i, p := range pairs {
		rawName, _, _ := strings.Cut(p, "=")
		pair, err := url.QueryUnescape(p)
		if err != nil {
			pair = p
		}
		if strings.Contains(strings.ToLower(pair), "password") {
			pairs[i] = rawName + "=xxxxx"
		}
	}
	return strings.Join(pairs, "&")
}

var (
	schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)
	// quotedRE matches a Go-quoted or back-quoted string, as in url's
	// invalid port ":x" after host.
	quotedRE = regexp.MustCompile(` ?(?:"(?:[^"\\]|\\.)*"|` + "`[^`]*`" + `)`)
	// hostRE admits names, IPv4 and bracketed IPv6 addresses (with a %zone),
	// ports, escapes, and pgx's comma-separated list of hosts.
	hostRE = regexp.MustCompile(`^[A-Za-z0-9._~%:\[\],-]+$`)
)

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

// reason says why a DSN was refused without the parts of it that the
// parsers repeat: url.Error and pgx quote the whole DSN, and url, pgx and
// go-sql-driver quote the part they reject, any of which may hold the
// password.
func reason(err error) string {
	s := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) {
		s = ue.Err.Error()
	}
	if _, after, ok := strings.Cut(s, "`: "); ok {
		s = after // pgx: cannot parse `DSN`: why
	}
	return quotedRE.ReplaceAllString(s, "")
}
