package migrate

import (
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/schema"
)

// Migration is one versioned step of the schema.
type Migration struct {
	Version    int64
	Name       string
	Statements []string
}

var (
	migrationFile = regexp.MustCompile(`^(\d+)_([a-z0-9_]+)\.(up|down)\.sql$`)
	// defaultIdent matches the files' lock_table and the names derived from
	// it (lock_table_fence, ...), with the single quotes of a string literal.
	defaultIdent = regexp.MustCompile(`'?\b` + schema.DefaultTable + `\w*'?`)
)

// Load reads d's up migrations from schema.FS, oldest first, and names
// table in place of the files' lock_table. table must be validated already.
func Load(d dialect.Dialect, table string) ([]Migration, error) {
	return load(d, table, "up")
}

// LoadDown reads d's down migrations, which undo the up migrations of the
// same versions, as Load does (oldest first).
func LoadDown(d dialect.Dialect, table string) ([]Migration, error) {
	return load(d, table, "down")
}

// load reads the migrations of direction way ("up" or "down").
func load(d dialect.Dialect, table, way string) ([]Migration, error) {
	dir := d.Name()
	entries, err := fs.ReadDir(schema.FS, dir)
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		m := migrationFile.FindStringSubmatch(e.Name())
		if m == nil || m[3] != way {
			continue
		}
		v, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			return nil, err
		}
		text, err := fs.ReadFile(schema.FS, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		body := RenameTable(string(text), table, d.Quote)
		out = append(out, Migration{Version: v, Name: m[2], Statements: SplitStatements(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Run returns the statements of m to run: all of them, or, when portable,
// all but those that create or drop a trigger (plain SQL only: the reaper
// then raises the fence itself).
func (m Migration) Run(portable bool) []string {
	if !portable {
		return m.Statements
	}
	var out []string
	for _, stmt := range m.Statements {
		if !isTrigger(stmt) {
			out = append(out, stmt)
		}
	}
	return out
}

// Record returns the statement that records version v in d's version
// table: the insert of d.VersionSQL with v, a number, written in place of
// its one parameter ($1, ?1 or ?), so that the statement Apply runs is the
// one a script prints.
func Record(d dialect.Dialect, v int64) string {
	_, insert := d.VersionSQL()
	return versionParam.ReplaceAllLiteralString(insert, strconv.FormatInt(v, 10))
}

// versionParam matches the parameter of a version insert.
var versionParam = regexp.MustCompile(`\$1|\?1|\?`)

// RenameTable puts table in place of lock_table in a schema file: quoted
// as an identifier (PostgreSQL would fold an unquoted Locks to locks, and a
// reserved word would not parse), or inside the file's own quotes where it
// is a string literal ('lock_table').
func RenameTable(text, table string, quote func(string) string) string {
	return defaultIdent.ReplaceAllStringFunc(text, func(m string) string {
		open, close := strings.HasPrefix(m, "'"), len(m) > 1 && strings.HasSuffix(m, "'")
		name := table + strings.TrimPrefix(strings.Trim(m, "'"), schema.DefaultTable)
		switch {
		case open && close:
			return "'" + name + "'"
		case open:
			return "'" + quote(name)
		case close:
			return quote(name) + "'"
		}
		return quote(name)
	})
}

// SplitStatements splits a schema file at semicolons that end a line,
// leaving out comment lines.
func SplitStatements(sqlText string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.SplitAfter(sqlText, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		cur.WriteString(line)
		if strings.HasSuffix(strings.TrimRight(line, " \t\r\n"), ";") {
			if s := strings.TrimSpace(cur.String()); s != "" {
				out = append(out, strings.TrimSuffix(s, ";"))
			}
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, strings.TrimSuffix(s, ";"))
	}
	return out
}

// isTrigger reports whether stmt creates or drops a trigger.
func isTrigger(stmt string) bool {
	f := strings.Fields(strings.ToUpper(stmt))
	return len(f) >= 2 && (f[0] == "CREATE" || f[0] == "DROP") && f[1] == "TRIGGER"
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
