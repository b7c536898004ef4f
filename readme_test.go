package dblock_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// readmeBlock is one fenced ```go block of README.md.
type readmeBlock struct {
	line int // of the opening fence
	code string
}

// readmeGoBlocks returns the ```go blocks of a Markdown text, in order.
func readmeGoBlocks(md string) []readmeBlock {
	var blocks []readmeBlock
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```go" {
			continue
		}
		b := readmeBlock{line: i + 1}
		var code []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			code = append(code, lines[i])
		}
		b.code = strings.Join(code, "\n") + "\n"
		blocks = append(blocks, b)
	}
	return blocks
}

// TestREADME holds README.md to what it prints. Every ```go block must be a
// complete program (package main): the test vets and builds it (with the go
// command that runs the test, in this module, so it builds against this
// tree), runs it with DATABASE_URL set to the test PostgreSQL in a schema
// of its own (search_path), and fails unless it exits 0; run again with
// DATABASE_URL unset, it must exit non-zero, name DATABASE_URL, and create
// nothing in the database the driver's defaults would reach. A block meant
// only to be read must not be fenced as ```go. The Example functions the
// README names must exist.
func TestREADME(t *testing.T) {
	md, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeGoBlocks(string(md))
	if len(blocks) == 0 {
		t.Fatal("README.md has no ```go block")
	}
	db := dbtest.Open(t, dblock.Postgres)
	for i, b := range blocks {
		t.Run(fmt.Sprintf("block%d", i+1), func(t *testing.T) {
			if !strings.HasPrefix(b.code, "package main\n") {
				t.Fatalf("README.md:%d: a ```go block must be a complete program, starting with package main; it starts with %q",
					b.line, strings.SplitN(b.code, "\n", 2)[0])
			}
			file := filepath.Join(t.TempDir(), "main.go")
			if err := os.WriteFile(file, []byte(b.code), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			schema := "readme_" + dbtest.TableName()
			if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if _, err := db.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
					t.Errorf("drop schema %s: %v", schema, err)
				}
			})
			bin := filepath.Join(t.TempDir(), "readme")
			for _, args := range [][]string{{"vet", file}, {"build", "-o", bin, file}} {
				cmd := exec.CommandContext(ctx, "go", args...)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("README.md:%d: go %s: %v\n%s", b.line, args[0], err, out)
				}
			}
			dsn := dbtest.DSN(dblock.Postgres)
			run := exec.CommandContext(ctx, bin)
			run.Env = append(withoutDatabaseURL(), "DATABASE_URL="+dbtest.WithParam(dsn, "search_path="+schema))
			if out, err := run.CombinedOutput(); err != nil {
				t.Fatalf("README.md:%d: the program: %v\n%s", b.line, err, out)
			}
			// Without DATABASE_URL, the program must stop and say so. The
			// driver's own defaults (PG* variables, or user and database
			// root over the Unix socket) would reach some database: here
			// they name a fresh schema of the test server, which must stay
			// empty.
			empty := "readme_unset_" + dbtest.TableName()
			if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+empty); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if _, err := db.Exec("DROP SCHEMA " + empty + " CASCADE"); err != nil {
					t.Errorf("drop schema %s: %v", empty, err)
				}
			})
			unset := exec.CommandContext(ctx, bin)
			unset.Env = append(withoutDatabaseURL(), pgEnv(t, dsn, empty)...)
			out, err := unset.CombinedOutput()
			if err == nil || !strings.Contains(string(out), "DATABASE_URL") {
				t.Errorf("README.md:%d: with DATABASE_URL unset the program exited with %v, saying %q; want a failure that names DATABASE_URL", b.line, err, out)
			}
			var made []string
			rows, err := db.QueryContext(ctx, "SELECT relname FROM pg_class WHERE relnamespace = $1::regnamespace ORDER BY relname", empty)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var name string
				if err := rows.Scan(&name); err != nil {
					t.Fatal(err)
				}
				made = append(made, name)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if len(made) > 0 {
				t.Errorf("README.md:%d: with DATABASE_URL unset the program created %q in the database the driver's defaults named", b.line, made)
			}
		})
	}
	t.Run("examples", func(t *testing.T) {
		tests, err := filepath.Glob("*_test.go")
		if err != nil {
			t.Fatal(err)
		}
		var src strings.Builder
		for _, f := range tests {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			src.Write(b)
		}
		named := regexp.MustCompile(`\bExample[A-Z]\w*`).FindAllString(string(md), -1)
		for _, name := range named {
			if !strings.Contains(src.String(), "func "+name+"()") {
				t.Errorf("README.md names %s, which no _test.go file of package dblock defines", name)
			}
		}
	})
}

// withoutDatabaseURL is the test's environment without DATABASE_URL and
// the PG* variables that pgx reads.
func withoutDatabaseURL() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return env
}

// pgEnv returns the PG* variables that make pgx's defaults (the DSN "")
// connect to dsn's server and database, with schema as the search_path.
func pgEnv(t *testing.T, dsn, schema string) []string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PGHOST=" + u.Hostname(), "PGPORT=" + u.Port(), "PGUSER=" + u.User.Username(),
		"PGDATABASE=" + strings.TrimPrefix(u.Path, "/"), "PGOPTIONS=-c search_path=" + schema}
	if pw, ok := u.User.Password(); ok {
		env = append(env, "PGPASSWORD="+pw)
	}
	if mode := u.Query().Get("sslmode"); mode != "" {
		env = append(env, "PGSSLMODE="+mode)
	}
	return env
}

// TestDocLinks holds the documentation's relative links to what they name:
// every [text](target) in README.md, CONTRIBUTING.md, bench/README.md and
// docs/*.md whose target is not a URL must name a file of the repository
// and, with #anchor, a heading of that Markdown file, by the anchors GitHub
// makes (lower case; letters, digits, '_' and '-' kept, spaces made '-',
// the rest dropped; "-1", "-2" after a repeated heading). Links in fenced
// code blocks are not links.
func TestDocLinks(t *testing.T) {
	files := []string{"README.md", "CONTRIBUTING.md", "bench/README.md"}
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, docs...)
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	url := regexp.MustCompile(`^[a-z]+:`)
	anchorsOf := map[string]map[string]bool{}
	checked := 0
	for _, file := range files {
		md, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range markdownProse(string(md)) {
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if url.MatchString(target) {
					continue
				}
				checked++
				path, anchor, _ := strings.Cut(target, "#")
				full := file
				if path != "" {
					full = filepath.Join(filepath.Dir(file), path)
				}
				if _, err := os.Stat(full); err != nil {
					t.Errorf("%s:%d: link %s: %v", file, i+1, target, err)
					continue
				}
				if anchor == "" || !strings.HasSuffix(full, ".md") {
					continue
				}
				if anchorsOf[full] == nil {
					b, err := os.ReadFile(full)
					if err != nil {
						t.Fatal(err)
					}
					anchorsOf[full] = markdownAnchors(string(b))
				}
				if !anchorsOf[full][anchor] {
					t.Errorf("%s:%d: link %s: %s has no heading with the anchor #%s", file, i+1, target, full, anchor)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the test reads nothing")
	}
}

// markdownProse returns md's lines with those of fenced code blocks (and
// the fences) blanked, so that line numbers stay.
func markdownProse(md string) []string {
	lines := strings.Split(md, "\n")
	fenced := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			lines[i] = ""
			continue
		}
		if fenced {
			lines[i] = ""
		}
	}
	return lines
}

// markdownAnchors returns the anchors GitHub gives md's headings.
func markdownAnchors(md string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	heading := regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	for _, l := range markdownProse(md) {
		m := heading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		var slug strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case unicode.IsLetter(r), unicode.IsDigit(r), r == '_', r == '-':
				slug.WriteRune(r)
			case r == ' ':
				slug.WriteRune('-')
			}
		}
		s := slug.String()
		if n := seen[s]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			anchors[s] = true
		}
		seen[s]++
	}
	return anchors
}
