package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/dialect/mysql"
	"github.com/dblockhq/dblock/internal/dialect/postgres"
	"github.com/dblockhq/dblock/internal/dialect/sqlite"
	"github.com/dblockhq/dblock/internal/migrate"
)

// printFlags are migrate's flags for --print.
type printFlags struct {
	print     bool
	dialect   string
	from      int64
	down      bool
	delimiter bool
}

func addPrintFlags(fs *cmdFlags) *printFlags {
	p := &printFlags{}
	fs.BoolVar(&p.print, "print", false, "print the SQL on stdout instead of running it (for psql, mysql, sqlite3 or a migration tool); connects to nothing")
	fs.StringVar(&p.dialect, "dialect", "", "with --print: the `dialect`, postgres, mysql, sqlite or tidb (default: the kind of --dsn or $DBLOCK_DSN)")
	fs.Int64Var(&p.from, "from", 0, "with --print: the schema `version` the table is at: print only the newer versions (with --down: undo down to it)")
	fs.BoolVar(&p.down, "down", false, "with --print: the SQL that undoes the versions after --from, newest first (and, with --history, turns the history off)")
	fs.BoolVar(&p.delimiter, "delimiter", true, "with --print on MySQL: put DELIMITER lines around the history's triggers, as the mysql client, Flyway and Atlas read them (false: for goose and golang-migrate)")
	return p
}

// check refuses the flags of --print without it.
func (p *printFlags) check(fs *cmdFlags) error {
	if p.print {
		return nil
	}
	for _, name := range []string{"dialect", "from", "down", "delimiter"} {
		if flagSet(fs, name) {
			return exitf(exitUsage, "--%s is a flag of --print (dblock migrate --print --%s …)", name, name)
		}
	}
	return nil
}

// printDialects are --dialect's values: the dialect, and the engine whose
// way the script follows.
var printDialects = map[string]struct {
	d      func(dialect.Config) dialect.Dialect
	engine dialect.Engine
	name   string // for people
	client string // how to apply the script
}{
	"postgres": {postgres.New, dialect.EnginePostgres, "PostgreSQL", "psql -v ON_ERROR_STOP=1 -f FILE DSN"},
	"mysql":    {mysql.New, dialect.EngineMySQL, "MySQL and MariaDB", "mysql DATABASE < FILE"},
	"sqlite":   {sqlite.New, dialect.EngineSQLite, "SQLite", "sqlite3 DATABASE_FILE < FILE"},
	"tidb":     {mysql.New, dialect.EngineTiDB, "TiDB", "mysql -h HOST -P 4000 DATABASE < FILE"},
}

// printSchema writes the SQL of --print: what migrate would run on a table
// at version --from (or, with --down, what undoes it), without connecting.
func printSchema(a *app, c *common, p *printFlags, history bool) error {
	if err := c.check(); err != nil {
		return err
	}
	name := p.dialect
	if name == "" {
		dsn := c.dsn
		if dsn == "" {
			dsn = os.Getenv("DBLOCK_DSN")
		}
		if dsn == "" {
			return exitf(exitUsage, "--print needs --dialect postgres, mysql, sqlite or tidb (or a --dsn to read it from)")
		}
		t, err := parseDSN(dsn)
		a.stderr.hide(t.password)
		if err != nil {
			return exitErr(exitConfig, err)
		}
		name = string(t.dialect)
	}
	pd, ok := printDialects[name]
	if !ok {
		return exitf(exitUsage, "--dialect %q: want postgres, mysql, sqlite or tidb", name)
	}
	latest := dblock.SchemaVersion()
	if p.from < 0 || p.from > latest {
		return exitf(exitUsage, "--from %d: this dblock knows schema versions 0 (no table) to %d", p.from, latest)
	}
	d := pd.d(dialect.Config{Table: c.table})
	// As Migrate: SQLite keeps its triggers in portable mode; TiDB has none.
	portable := (c.portable || pd.engine.Distributed()) && name != "sqlite"
	script, err := migrate.Script(d, migrate.ScriptOptions{
		Table: c.table, Engine: pd.engine, From: p.from, Portable: portable,
		History: history, Down: p.down, Delimiter: p.delimiter && d.Name() == "mysql",
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "-- dblock %s: table %s on %s: %s.\n-- Apply it with %s, or a migration tool (docs/usage.md, \"Schema\").\n",
		version(), c.table, pd.name, scriptSummary(p, latest, history, portable), pd.client)
	if strings.TrimSpace(script) != "" {
		fmt.Fprint(a.stdout, script)
	}
	return nil
}

// scriptSummary says in a few words what a script of --print does.
func scriptSummary(p *printFlags, latest int64, history, portable bool) string {
	versions := fmt.Sprintf("versions %d to %d", p.from+1, latest)
	if p.from+1 == latest {
		versions = fmt.Sprintf("version %d", latest)
	}
	var what string
	switch {
	case p.from == latest:
		what = "no version"
	case p.down && p.from == 0:
		what = "undoes " + versions + ", newest first, and drops the version table"
	case p.down:
		what = fmt.Sprintf("undoes %s, newest first, back to version %d", versions, p.from)
	default:
		what = versions
	}
	if history && p.down {
		what += "; the history off first"
	} else if history {
		what += "; the history on"
	}
	if portable {
		what += "; without triggers"
	}
	return what
}
