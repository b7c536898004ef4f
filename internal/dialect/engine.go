package dialect

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync/atomic"
)

// Engine is the server behind a dialect's wire protocol, learned from its
// version string: TiDB speaks MySQL's, CockroachDB and YugabyteDB speak
// PostgreSQL's.
type Engine string

// The engines dblock tells apart.
const (
	EnginePostgres    Engine = "postgres"
	EngineCockroachDB Engine = "cockroachdb"
	EngineYugabyteDB  Engine = "yugabytedb"
	EngineMySQL       Engine = "mysql"
	EngineMariaDB     Engine = "mariadb"
	EngineTiDB        Engine = "tidb"
	// EngineGalera is MariaDB Galera Cluster: a MariaDB server with
	// wsrep_on = ON, one node of a multi-primary cluster.
	EngineGalera Engine = "galera"
	EngineSQLite Engine = "sqlite"
)

// EngineOf names the engine of a dialect from the server's version string
// (SELECT version()).
func EngineOf(dialectName, version string) Engine {
	v := strings.ToLower(version)
	switch dialectName {
	case Postgres:
		switch {
		case strings.Contains(v, "cockroachdb"):
			return EngineCockroachDB
		case strings.Contains(v, "-yb-"), strings.Contains(v, "yugabyte"):
			return EngineYugabyteDB
		}
		return EnginePostgres
	case MySQL:
		switch {
		case strings.Contains(v, "tidb"):
			return EngineTiDB
		case strings.Contains(v, "mariadb"):
			return EngineMariaDB
		}
		return EngineMySQL
	}
	return EngineSQLite
}

// Distributed reports whether e is a distributed SQL engine, on which
// dblock runs in portable mode: plain SQL only (no triggers, advisory
// locks or notifications between sessions). Galera is one: its named
// locks (GET_LOCK) are one node's, or refused (MDEV-30473).
func (e Engine) Distributed() bool {
	switch e {
	case EngineTiDB, EngineCockroachDB, EngineYugabyteDB, EngineGalera:
		return true
	}
	return false
}

// DetectEngine asks the server behind q which engine it is.
func DetectEngine(ctx context.Context, q Querier, dialectName string) (Engine, error) {
	if dialectName == SQLite {
		return EngineSQLite, nil
	}
	var version string
	if err := q.QueryRowContext(ctx, `SELECT version()`).Scan(&version); err != nil {
		return "", err
	}
	e := EngineOf(dialectName, version)
	if e == EngineMariaDB {
		return galeraOf(ctx, q)
	}
	return e, nil
}

// galeraOf tells a Galera node (wsrep_on = ON, as Flyway checks it) from a
// lone MariaDB server; a server built without wsrep has no such variable.
func galeraOf(ctx context.Context, q Querier) (Engine, error) {
	var name, on string
	err := q.QueryRowContext(ctx, `SHOW GLOBAL VARIABLES LIKE 'wsrep_on'`).Scan(&name, &on)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return EngineMariaDB, nil
	case err != nil:
		return "", err
	case strings.EqualFold(on, "ON") || on == "1":
		return EngineGalera, nil
	}
	return EngineMariaDB, nil
}

// EngineProbe learns the engine once, from the first statement that needs
// it; a failed read is tried again next time. The zero value is ready; a
// forced engine (Set) is never probed.
type EngineProbe struct {
	dialectName string
	engine      atomic.Pointer[Engine]
}

// NewEngineProbe returns a probe for dialectName's servers.
func NewEngineProbe(dialectName string) *EngineProbe {
	return &EngineProbe{dialectName: dialectName}
}

// Set fixes the engine without asking the server.
func (p *EngineProbe) Set(e Engine) { p.engine.Store(&e) }

// Known returns the engine learnt so far ("" before the first statement
// that needed it).
func (p *EngineProbe) Known() Engine {
	if e := p.engine.Load(); e != nil {
		return *e
	}
	return ""
}

// Get returns the engine behind q, asking the server the first time.
func (p *EngineProbe) Get(ctx context.Context, q Querier) (Engine, error) {
	if e := p.engine.Load(); e != nil {
		return *e, nil
	}
	e, err := DetectEngine(ctx, q, p.dialectName)
	if err != nil {
		return "", err
	}
	p.engine.CompareAndSwap(nil, &e)
	return *p.engine.Load(), nil
}
