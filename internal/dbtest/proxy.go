package dbtest

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/faultproxy"
	"github.com/go-sql-driver/mysql"
)

// ProxyDSN returns the address of d's server ("host:port") and a function
// that turns another address (a fault proxy's) into a DSN for d that dials
// it instead, keeping every other setting.
func ProxyDSN(d dblock.Dialect) (target string, via func(addr string) string, err error) {
	dsn := DSN(d)
	switch d {
	case dblock.Postgres:
		u, err := url.Parse(dsn)
		if err != nil {
			return "", nil, fmt.Errorf("dbtest: the postgres DSN must be a URL here: %w", err)
		}
		return u.Host, func(addr string) string { v := *u; v.Host = addr; return v.String() }, nil
	case dblock.MySQL:
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return "", nil, fmt.Errorf("dbtest: mysql DSN: %w", err)
		}
		return cfg.Addr, func(addr string) string { c := cfg.Clone(); c.Addr = addr; return c.FormatDSN() }, nil
	}
	return "", nil, fmt.Errorf("dbtest: unknown dialect %q", d)
}

// Proxy starts a fault proxy in front of d's server, closed at cleanup, and
// returns it with a DSN that goes through it.
func Proxy(t testing.TB, d dblock.Dialect) (*faultproxy.Proxy, string) {
	t.Helper()
	target, via, err := ProxyDSN(d)
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, via(p.Addr())
}
