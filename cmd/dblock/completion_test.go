package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// completionScript writes dblock completion SHELL to a file and returns it.
func completionScript(t *testing.T, shell string) string {
	t.Helper()
	r := cli(t, "completion", shell)
	if r.code != 0 || r.stdout == "" {
		t.Fatalf("completion %s: status %d, stderr %q", shell, r.code, r.stderr)
	}
	file := filepath.Join(t.TempDir(), "dblock."+shell)
	if err := os.WriteFile(file, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// shell runs script in the named shell, which must be installed
// (scripts/dbup.sh installs zsh and fish), and returns its output.
func shell(t *testing.T, name string, args ...string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("no %s on PATH: scripts/dbup.sh installs it", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir()) // no user's rc files
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %q: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// completionCases are command lines, the word being completed last, and
// words the completions must hold (and, after "!", must not).
var completionCases = []struct {
	line []string
	want []string
}{
	{[]string{""}, []string{"migrate", "run", "ls", "completion", "demo", "ui"}},
	{[]string{"mi"}, []string{"migrate", "!run"}},
	{[]string{"migrate", "--pr"}, []string{"--print", "!--dsn"}},
	{[]string{"migrate", "--print", "--dialect", ""}, []string{"postgres", "mysql", "sqlite", "tidb"}},
	{[]string{"run", "--"}, []string{"--key", "--no-wait", "--grace", "--dsn", "--table"}},
	{[]string{"run", "--key", "k", "--", "ech"}, []string{"echo"}},
	{[]string{"help", "ru"}, []string{"run", "!migrate"}},
	{[]string{"completion", ""}, []string{"bash", "zsh", "fish"}},
	{[]string{"ls", "--w"}, []string{"--waiters", "--watch", "!--key"}},
}

func checkCompletions(t *testing.T, line []string, got []string, want []string) {
	t.Helper()
	for _, w := range want {
		if no, ok := strings.CutPrefix(w, "!"); ok {
			if slices.Contains(got, no) {
				t.Errorf("dblock %s: completions %q hold %q", strings.Join(line, " "), got, no)
			}
		} else if !slices.Contains(got, w) {
			t.Errorf("dblock %s: completions %q, want %q among them", strings.Join(line, " "), got, w)
		}
	}
}

// TestCompletion: dblock completion bash, zsh and fish write scripts that
// the shells load and that complete commands, flags (every command's own,
// as it defines them), --dialect's values and, after run's --, commands.
// bash and fish complete for real (bash: _dblock with COMP_WORDS; fish:
// complete -C); zsh's completion system needs a terminal, so its test
// checks that compinit registers _dblock and what _dblock asks of
// _describe and _arguments.
func TestCompletion(t *testing.T) {
	t.Run("bash", func(t *testing.T) {
		file := completionScript(t, "bash")
		var script strings.Builder
		script.WriteString("source " + file + "\ncomplete -p dblock\n")
		for _, c := range completionCases {
			words := append([]string{"dblock"}, c.line...)
			script.WriteString("COMP_WORDS=(")
			for _, w := range words {
				script.WriteString("'" + w + "' ")
			}
			script.WriteString(")\nCOMP_CWORD=" + strconv.Itoa(len(words)-1) + "\n_dblock\necho \"${COMPREPLY[*]}\"\n")
		}
		out := strings.Split(strings.TrimSuffix(shell(t, "bash", "--norc", "-c", script.String()), "\n"), "\n")
		if len(out) != len(completionCases)+1 || out[0] != "complete -F _dblock dblock" {
			t.Fatalf("bash printed %q", out)
		}
		for i, c := range completionCases {
			checkCompletions(t, c.line, strings.Fields(out[i+1]), c.want)
		}
		// --name=VALUE: bash splits the word at =.
		eq := shell(t, "bash", "--norc", "-c", "source "+file+"\nCOMP_WORDS=(dblock migrate --dialect = my)\nCOMP_CWORD=4\n_dblock\necho \"${COMPREPLY[*]}\"")
		if strings.TrimSpace(eq) != "mysql" {
			t.Errorf("dblock migrate --dialect=my: %q, want mysql", eq)
		}
	})
	t.Run("fish", func(t *testing.T) {
		file := completionScript(t, "fish")
		for _, c := range completionCases {
			line := strings.Join(append([]string{"dblock"}, c.line...), " ")
			out := shell(t, "fish", "--no-config", "-c", "source "+file+"; complete -C'"+line+"'")
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				w, _, _ := strings.Cut(l, "\t")
				got = append(got, w)
			}
			checkCompletions(t, c.line, got, c.want)
		}
	})
	t.Run("zsh", func(t *testing.T) {
		file := completionScript(t, "zsh")
		if out := shell(t, "zsh", "-f", "-c", "autoload -U compinit && compinit -u -D && source "+file+" && print -r -- $_comps[dblock]"); strings.TrimSpace(out) != "_dblock" {
			t.Fatalf("after compinit, dblock completes with %q, want _dblock", out)
		}
		stubs := `_describe() { print -rl -- "${(@)${(P)${@[-1]}}%%:*}" }
_arguments() { print -rl -- "$@" }
_values() { print -rl -- "${@[2,-1]}" }
compdef() { }
source ` + file + "\n"
		for _, c := range completionCases {
			words := append([]string{"dblock"}, c.line...)
			var script strings.Builder
			script.WriteString(stubs + "words=(")
			for _, w := range words {
				script.WriteString("'" + w + "' ")
			}
			script.WriteString(")\nCURRENT=" + strconv.Itoa(len(words)) + "\n_dblock\n")
			lines := strings.Split(strings.TrimSpace(shell(t, "zsh", "-f", "-c", script.String())), "\n")
			if slices.Contains(c.line, "--") { // after run's --: zsh's own completion of a command line
				if !slices.Contains(lines, "*::command:_normal") {
					t.Errorf("dblock %s: _arguments got %q, want *::command:_normal", strings.Join(c.line, " "), lines)
				}
				continue
			}
			// What _dblock offers (_arguments' specs: their flag), kept
			// where it starts with the word being completed, as zsh would.
			prefix := c.line[len(c.line)-1]
			var got []string
			if len(c.line) > 1 && prefix == "" && strings.HasPrefix(c.line[len(c.line)-2], "--") {
				prev := c.line[len(c.line)-2]
				// a flag's value: the choices of its spec, --dialect=[…]:dialect:(a b)
				for _, l := range lines {
					if strings.HasPrefix(l, prev+"=[") && strings.HasSuffix(l, ")") {
						got = strings.Fields(l[strings.LastIndexByte(l, '(')+1 : len(l)-1])
					}
				}
				checkCompletions(t, c.line, got, c.want)
				continue
			}
			for _, l := range lines {
				if i := strings.IndexByte(l, '['); i > 0 {
					l = l[strings.LastIndexByte(l[:i], ')')+1 : i]
				}
				l = strings.TrimSuffix(l, "=")
				if strings.HasPrefix(l, prefix) {
					got = append(got, l)
				}
			}
			checkCompletions(t, c.line, got, c.want)
		}
	})
}

// TestCompletionFlags: the scripts offer every flag of every command, as
// the command defines it, and completion takes one shell.
func TestCompletionFlags(t *testing.T) {
	bash := cli(t, "completion", "bash").stdout
	for name := range commands {
		if name == "completion" {
			continue
		}
		fl, err := flagsOf(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(fl) < 3 {
			t.Errorf("%s: flags %v, want its own", name, fl)
		}
		for _, f := range fl {
			if !strings.Contains(bash, "    "+name+") flags=\"") || !strings.Contains(bash[strings.Index(bash, "    "+name+") flags="):], "--"+f.name) {
				t.Errorf("the bash script offers no --%s for %s", f.name, name)
			}
		}
	}
	for _, args := range [][]string{{"completion"}, {"completion", "tcsh"}, {"completion", "bash", "zsh"}} {
		if r := cli(t, args...); r.code != exitUsage {
			t.Errorf("%v: status %d, want %d", args, r.code, exitUsage)
		}
	}
}
