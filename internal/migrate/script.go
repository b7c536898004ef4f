package migrate

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
)

// ScriptOptions says which SQL Script writes.
type ScriptOptions struct {
	Table string // validated already
	// Engine is the engine the script is for: EngineTiDB takes the history
	// of tidb.sql; another distributed engine has none.
	Engine dialect.Engine
	// From is the schema version the table is at (0: no table): an up
	// script brings it from there to the newest version, a down script
	// back to it from the newest.
	From int64
	// Portable leaves out the statements that create or drop triggers, as
	// Apply does in portable mode.
	Portable bool
	// History adds the statements that turn the history on (off when
	// Down), after the versions (before them when Down).
	History bool
	// Down writes the statements that undo the versions after From,
	// newest first, instead.
	Down bool
	// Delimiter wraps each statement with semicolons inside it (MySQL's
	// triggers of the history, BEGIN … END) in DELIMITER lines, for the
	// mysql client and the tools that read scripts as it does.
	Delimiter bool
}

// Script returns the SQL that Apply (and InstallHistory) run, as a script
// for the database's own client: psql, mysql, sqlite3. Each statement ends
// with a semicolon at the end of a line, and the versions are recorded in
// <table>_version with the statements Apply records them with, so that
// Migrate, run on the table later, knows what is there. A comment line
// before each version names it.
func Script(d dialect.Dialect, o ScriptOptions) (string, error) {
	up, err := Load(d, o.Table)
	if err != nil {
		return "", err
	}
	latest := up[len(up)-1].Version
	if o.From < 0 || o.From > latest {
		return "", fmt.Errorf("%w: schema version %d: this dblock knows versions 0 to %d", dberr.ErrInvalidOption, o.From, latest)
	}
	var history []string
	if o.History {
		if history, err = History(d, o.Engine, o.Table, !o.Down); err != nil {
			return "", err
		}
	}
	var b strings.Builder
	write := func(stmts ...string) {
		for _, s := range stmts {
			if o.Delimiter && strings.Contains(s, ";") {
				b.WriteString("DELIMITER //\n" + s + "\n//\nDELIMITER ;\n")
				continue
			}
			b.WriteString(s + ";\n")
		}
	}
	comment := func(format string, args ...any) {
		b.WriteString("\n-- " + fmt.Sprintf(format, args...) + "\n")
	}
	versions := d.Quote(o.Table + "_version")
	if o.Down {
		if o.History {
			comment("the history off")
			write(history...)
		}
		down, err := LoadDown(d, o.Table)
		if err != nil {
			return "", err
		}
		for i := len(down) - 1; i >= 0; i-- {
			m := down[i]
			if m.Version <= o.From {
				break
			}
			comment("version %d (%s) undone", m.Version, m.Name)
			write(m.Run(o.Portable)...)
			write(`DELETE FROM ` + versions + ` WHERE version = ` + strconv.FormatInt(m.Version, 10))
		}
		if o.From == 0 {
			comment("the version table")
			write(`DROP TABLE IF EXISTS ` + versions)
		}
		return b.String(), nil
	}
	create, _ := d.VersionSQL()
	comment("the version table, which records the versions applied")
	write(create)
	for _, m := range up {
		if m.Version <= o.From {
			continue
		}
		comment("version %d (%s)", m.Version, m.Name)
		write(m.Run(o.Portable)...)
		write(Record(d, m.Version))
	}
	if o.History {
		comment("the history on")
		write(history...)
	}
	return b.String(), nil
}
