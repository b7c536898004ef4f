package dblock_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

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
// complete program (package main): the test vets it and runs it with
// `go run` (the go command that runs the test, in this module, so it builds
// against this tree), with DATABASE_URL set to the test PostgreSQL in a
// schema of its own (search_path), and fails unless it exits 0. A block
// meant only to be read must not be fenced as ```go. The Example functions
// the README names must exist.
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
			for _, args := range [][]string{{"vet", file}, {"run", file}} {
				cmd := exec.CommandContext(ctx, "go", args...)
				cmd.Env = append(os.Environ(), "DATABASE_URL="+dbtest.WithParam(dbtest.DSN(dblock.Postgres), "search_path="+schema))
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("README.md:%d: go %s: %v\n%s", b.line, args[0], err, out)
				}
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
