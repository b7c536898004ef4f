package dialect

import (
	"fmt"
	"strings"
)

// Queries holds a dialect's statement templates by name, parsed from the
// text of its queries.sql: each starts at a line "-- name: <name>" and
// runs to the next. Other lines starting with "--" are comments on the SQL
// and are dropped, so they never reach the server.
type Queries map[string]string

// ParseQueries parses text into Queries; it panics on a malformed file,
// which is embedded in the binary and so fails every test at once.
func ParseQueries(text string) Queries {
	q := Queries{}
	var name string
	var b strings.Builder
	flush := func() {
		if name != "" {
			q[name] = strings.TrimSpace(b.String())
		}
		b.Reset()
	}
	for _, line := range strings.SplitAfter(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if n, ok := strings.CutPrefix(trimmed, "-- name:"); ok {
			flush()
			name = strings.TrimSpace(n)
			if _, dup := q[name]; dup || name == "" {
				panic(fmt.Sprintf("dialect: query %q named twice or empty", name))
			}
			continue
		}
		if strings.HasPrefix(trimmed, "--") {
			continue
		}
		if name == "" && trimmed != "" {
			panic(fmt.Sprintf("dialect: SQL before the first name: %q", trimmed))
		}
		b.WriteString(line)
	}
	flush()
	return q
}

// Get returns the template name, through r when r is not nil; it panics
// when the file has no such query.
func (q Queries) Get(name string, r *strings.Replacer) string {
	s, ok := q[name]
	if !ok {
		panic("dialect: no query " + name)
	}
	if r != nil {
		s = r.Replace(s)
	}
	return s
}
