package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	flag "github.com/spf13/pflag"
)

// The completion scripts are generated from the commands' own flag sets
// (each command's flags, read as the command defines them: see
// flagsOf), so that they follow the flags without a list kept by hand.

// commandHelp is each command's line in the completions, as in usage.
var commandHelp = map[string]string{
	"migrate":    "create or upgrade the lock table (--print: its SQL)",
	"run":        "run CMD while holding a lock",
	"ls":         "list held locks, waiting calls, who blocks whom",
	"history":    "what happened to the locks",
	"leader":     "print an election's leader",
	"elect":      "run CMD while this process leads an election",
	"reap":       "delete expired and released rows",
	"unlock":     "break a lock by hand",
	"ui":         "a live web page of locks, waiters and history",
	"demo":       "workers contend for keys; checks safety",
	"completion": "print a shell completion script (bash, zsh, fish)",
	"help":       "a command's flags",
	"version":    "print dblock's version",
}

// shells are completion's arguments.
var shells = []string{"bash", "zsh", "fish"}

// flagChoices are the values of flags that take one of a few.
var flagChoices = map[string][]string{
	"dialect": {"postgres", "mysql", "sqlite", "tidb"},
}

// runsCommand says which commands end their flags at -- and run a CMD.
var runsCommand = map[string]bool{"run": true, "elect": true}

// errFlagsOnly is what a command returns in an app with flagsOnly set,
// having defined its flags and done nothing else.
var errFlagsOnly = errors.New("flags only")

// compFlag is a flag as the completions offer it.
type compFlag struct {
	name, short, help string
	value             bool     // takes a value
	choices           []string // the values it takes, when few
}

// flagsOf returns the flags of command name, as the command defines them:
// run in an app with flagsOnly set, it returns at parseFlags.
func flagsOf(name string) ([]compFlag, error) {
	cmd := commands[name]
	if cmd == nil {
		return nil, nil
	}
	a := &app{stdout: io.Discard, stderr: &scrubber{w: io.Discard}, flagsOnly: true}
	if err := cmd(context.Background(), a, nil); !errors.Is(err, errFlagsOnly) {
		return nil, fmt.Errorf("reading the flags of %s: %v", name, err)
	}
	var out []compFlag
	a.flags.VisitAll(func(f *flag.Flag) {
		if f.Hidden {
			return
		}
		_, help := flag.UnquoteUsage(f)
		out = append(out, compFlag{name: f.Name, short: f.Shorthand, help: firstClause(help),
			value: f.NoOptDefVal == "", choices: flagChoices[f.Name]})
	})
	out = append(out, compFlag{name: "help", short: "h", help: "print the command's flags"})
	return out, nil
}

// firstClause shortens a flag's help to its first clause, for a menu.
func firstClause(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	for _, sep := range []string{"; ", " ("} {
		if i := strings.Index(s, sep); i > 0 {
			s = s[:i]
		}
	}
	return s
}

// completionNames returns the words completed in first place: the
// commands, sorted.
func completionNames() []string {
	var names []string
	for n := range commandHelp {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func cmdCompletion(_ context.Context, a *app, args []string) error {
	fs := newFlagSet("completion")
	if err := a.parseFlags(fs, "dblock completion bash|zsh|fish", args); err != nil {
		return err
	}
	if fs.NArg() != 1 || !slices.Contains(shells, fs.Arg(0)) {
		return exitf(exitUsage, "which shell: dblock completion bash, zsh or fish")
	}
	flags := map[string][]compFlag{}
	for _, n := range completionNames() {
		fl, err := flagsOf(n)
		if err != nil {
			return err
		}
		flags[n] = fl
	}
	var script string
	switch fs.Arg(0) {
	case "bash":
		script = bashCompletion(flags)
	case "zsh":
		script = zshCompletion(flags)
	default:
		script = fishCompletion(flags)
	}
	_, err := io.WriteString(a.stdout, script)
	return err
}
