package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/go-sql-driver/mysql"
	flag "github.com/spf13/pflag"
)

// Exit codes; see doc.go and usage.
const (
	exitOK          = 0
	exitFailure     = 1   // the operation failed (e.g. unlock: nothing held the key)
	exitUsage       = 64  // EX_USAGE: bad command line
	exitUnavailable = 69  // EX_UNAVAILABLE: the database cannot be reached
	exitViolation   = 70  // EX_SOFTWARE: demo saw two holders overlap or a token go back
	exitLockLost    = 74  // EX_IOERR: run lost the lock while CMD ran
	exitTempFail    = 75  // EX_TEMPFAIL: run did not get the lock (see --conflict-exit)
	exitConfig      = 78  // EX_CONFIG: bad or unsupported DSN, or lock table missing
	exitCannotExec  = 126 // run: CMD found but could not be started
	exitNotFound    = 127 // run: CMD not found
)

const usage = `dblock: distributed locks in PostgreSQL or MySQL/MariaDB.

Usage:
  dblock migrate [flags]                      create or upgrade the lock table
  dblock migrate --print [--dialect D]        print its SQL instead (psql, mysql, goose, …)
  dblock run --key K [flags] -- CMD [ARGS...] run CMD while holding K
  dblock ls [--json] [flags]                  list held locks
  dblock ls --waiters [KEY] | --blocked       list waiting calls | who blocks whom
  dblock history [KEY] [--since D] [--json]   what happened to the locks (migrate --history)
  dblock leader NAME [--watch] [--json]       print an election's leader (--watch: every change)
  dblock elect NAME [--value V] -- CMD [ARGS] run CMD while this process leads NAME
  dblock reap [--schedule SPEC] [flags]       delete expired and released rows
  dblock unlock --force [flags] KEY           break a lock by hand (logged)
  dblock ui [--listen A] [--allow-unlock]     a live web page of locks, waiters and history
  dblock demo [flags]                         workers contend for keys; checks safety
  dblock completion bash|zsh|fish             print a shell completion script
  dblock help [CMD] | dblock --version

Every command takes:
  --dsn DSN      postgres://user:pass@host:5432/db?sslmode=disable, mysql://user:pass@host:3306/db
                 (or the driver's user:pass@tcp(host:3306)/db), or sqlite:PATH;
                 default $DBLOCK_DSN. With neither, demo, ls and ui use an embedded
                 SQLite file in the user's cache directory (one host); the
                 other commands refuse (status 78).
  --table NAME   lock table (default lock_table)
  -v, --verbose  log debug messages to stderr
run, elect and demo also take --ttl D, the lease of the locks taken
(default 30s). run --permits N --key NAME holds one of N permits of the
semaphore NAME instead of a lock. Flags may come before or after
arguments, except in run and elect, where whatever follows CMD (or --) is
CMD's own. Run "dblock help CMD" for CMD's flags.

Exit status:
  0     success; for run and elect, CMD's own status (128+N if CMD died of signal N)
  1     the operation failed (unlock: nothing held the key; other errors)
  64    bad command line
  69    the database server cannot be reached (run --wait D: for all of D)
  70    demo: a safety violation was seen
  74    run, elect: the lock (permit, term) was lost while CMD ran; CMD was
        sent SIGTERM, then SIGKILL
  75    run, elect: the lock (permit, term) was not acquired (--no-wait or
        --wait expired, also through a database restart); see --conflict-exit
  78    configuration: no DSN (any command but demo, ls, ui), bad or
        unsupported DSN, authentication failed, unknown database, missing
        privilege, or the lock table is missing (run dblock migrate)
  126   run, elect: CMD could not be started
  127   run, elect: CMD not found
  130, 143  run, elect: interrupted by SIGINT or SIGTERM while waiting
`

type command func(ctx context.Context, a *app, args []string) error

var commands = map[string]command{
	"migrate": cmdMigrate,
	"run":     cmdRun,
	"ls":      cmdLs,
	"history": cmdHistory,
	"leader":  cmdLeader,
	"elect":   cmdElect,
	"reap":    cmdReap,
	"unlock":  cmdUnlock,
	"ui":      cmdUI,
	"demo":    cmdDemo,
}

func init() {
	// completion reads the map above.
	commands["completion"] = cmdCompletion
}

// app carries what every command writes to. stderr scrubs the DSN's
// password from anything written through it.
type app struct {
	stdout io.Writer
	stderr *scrubber
	table  string // the lock table, once the database is known
	where  string // the redacted DSN, once parsed
	// flagsOnly makes parseFlags keep the command's flags in flags and
	// return errFlagsOnly, so that the command does nothing (completion
	// reads the commands' flags so).
	flagsOnly bool
	flags     *cmdFlags
}

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: &scrubber{w: stderr}}
	if len(args) == 0 {
		fmt.Fprintln(a.stderr, `dblock: missing command (run "dblock help")`)
		return exitUsage
	}
	name := args[0]
	if (name == superviseArg || name == supervisePidNSArg) && len(args) > 1 && args[1] == "--" {
		return runSupervisor(name, args[2:])
	}
	switch name {
	case "help", "-h", "-help", "--help":
		switch {
		case len(args) > 2:
			fmt.Fprintf(a.stderr, "dblock help: unexpected argument %q (dblock help [CMD])\n", args[2])
			return exitUsage
		case len(args) == 2 && commands[args[1]] != nil: // help CMD: CMD's flags
			name, args = args[1], []string{args[1], "--help"}
		case len(args) == 2 && !slices.Contains([]string{"help", "-h", "-help", "--help", "version", "--version"}, args[1]): // those: this help
			fmt.Fprintf(a.stderr, "dblock help: unknown command %q (run \"dblock help\")\n", args[1])
			return exitUsage
		default:
			fmt.Fprint(a.stdout, usage)
			return exitOK
		}
	case "version", "--version":
		fmt.Fprintln(a.stdout, "dblock "+version())
		return exitOK
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(a.stderr, "dblock: unknown command %q (run \"dblock help\")\n", name)
		return exitUsage
	}
	err := cmd(context.Background(), a, args[1:])
	code, msg := a.describe(err)
	if msg != "" {
		fmt.Fprintln(a.stderr, "dblock "+name+": "+unprefixed(msg))
	}
	return code
}

// exitError carries a chosen exit status; a nil err prints nothing.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

func exitErr(code int, err error) error { return &exitError{code: code, err: err} }

func exitf(code int, format string, args ...any) error {
	return &exitError{code: code, err: fmt.Errorf(format, args...)}
}

// refused reports errors of a server that answers but will not serve us:
// authentication (SQLSTATE 28…, dberr.Auth: MySQL 1045, 1698, ...), unknown
// database (3D000, 1049), missing privilege (42501, MySQL 1044, 1142, 1143).
func refused(err error) bool {
	s := dberr.SQLState(err)
	if strings.HasPrefix(s, "28") || s == "3D000" || s == "42501" || dberr.Auth(err) {
		return true
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1044, 1049, 1142, 1143:
			return true
		}
	}
	return false
}

// describe maps an error to an exit status and the line to print.
func (a *app) describe(err error) (int, string) {
	var ee *exitError
	switch {
	case err == nil:
		return exitOK, ""
	case errors.As(err, &ee):
		if ee.err == nil {
			return ee.code, ""
		}
		return ee.code, ee.err.Error()
	case errors.Is(err, dblock.ErrNoSchema):
		return exitConfig, fmt.Sprintf("table %s does not exist in %s; run \"dblock migrate\" first", a.table, a.where)
	case errors.Is(err, dblock.ErrInvalidOption), errors.Is(err, dblock.ErrInvalidKey):
		return exitUsage, err.Error()
	case dberr.Conn(err):
		return exitUnavailable, err.Error()
	case dberr.Prepared(err):
		return exitConfig, dberr.WithPreparedFix(err).Error()
	case refused(err):
		return exitConfig, err.Error()
	}
	return exitFailure, err.Error()
}

// oneLine folds s onto one line, leaving out a line that the text before
// it already ends with (pgx puts a cause on a line of its own after the
// line that wraps it).
func oneLine(s string) string {
	var out string
	for _, line := range strings.Split(s, "\n") {
		line = strings.Join(strings.Fields(line), " ")
		switch {
		case line == "" || strings.HasSuffix(out, line):
		case out == "":
			out = line
		default:
			out += " " + line
		}
	}
	return out
}

// errLine is err's text on one line without the package's "dblock: "
// prefixes, which the command's own prefix already says: wrapped errors
// repeat it ("dblock: lock lost: …: dblock: lock row taken over").
func errLine(err error) string { return unprefixed(err.Error()) }

// unprefixed is s on one line without the package's "dblock: " prefixes
// (errLine).
func unprefixed(s string) string {
	return strings.ReplaceAll(strings.TrimPrefix(oneLine(s), "dblock: "), ": dblock: ", ": ")
}

// cmdFlags is a command's flags: GNU-style (--name, -v), taken before and
// after the arguments unless SetInterspersed(false) makes the first
// argument end them (run: what follows CMD is CMD's).
type cmdFlags struct {
	*flag.FlagSet
	stopAtArg bool
}

// newFlagSet returns flags that report errors as values, not output.
func newFlagSet(name string) *cmdFlags {
	fs := flag.NewFlagSet("dblock "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = true
	return &cmdFlags{FlagSet: fs}
}

// SetInterspersed sets whether flags may follow arguments.
func (fs *cmdFlags) SetInterspersed(on bool) {
	fs.stopAtArg = !on
	fs.FlagSet.SetInterspersed(on)
}

// parseFlags parses args; -h or --help prints the command's help to stdout.
func (a *app) parseFlags(fs *cmdFlags, synopsis string, args []string) error {
	if a.flagsOnly {
		a.flags = fs
		return errFlagsOnly
	}
	err := fs.Parse(fs.longDashes(args))
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(a.stdout, "Usage: %s\n\nFlags:\n%s\nRun \"dblock help\" for the exit statuses.\n", synopsis, fs.FlagUsages())
		return exitErr(exitOK, nil)
	}
	if err != nil {
		return exitf(exitUsage, "%v (see \"%s -h\")", err, fs.Name())
	}
	return nil
}

// longDashes returns args with the single-dash long flags that the
// standard flag package took (-key K, -no-wait, -table=T) spelled with two
// dashes, so that command lines written for it keep working. It leaves
// flag values alone, and stops at "--" and, when the first argument ends
// the flags, there.
func (fs *cmdFlags) longDashes(args []string) []string {
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		arg := out[i]
		if arg == "--" {
			break
		}
		if len(arg) < 2 || arg[0] != '-' {
			if fs.stopAtArg {
				break
			}
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimPrefix(arg[1:], "-"), "=")
		var f *flag.Flag
		switch {
		case strings.HasPrefix(arg, "--"):
			f = fs.Lookup(name)
		case len(name) == 1:
			f = fs.ShorthandLookup(name)
		default:
			if f = fs.Lookup(name); f != nil {
				out[i] = "-" + arg
			}
		}
		if f != nil && f.NoOptDefVal == "" && !hasValue {
			i++ // the next argument is its value
		}
	}
	return out
}

// flagSet reports whether name was given on the command line.
func flagSet(fs *cmdFlags, name string) bool { return fs.Changed(name) }

// version returns the module version dblock was built from, or "(devel)".
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// scrubber replaces secrets in everything written through it: a last
// guard that no password reaches the terminal, whatever a driver says.
type scrubber struct {
	w       io.Writer
	secrets []string
}

// minSecret is the shortest secret scrubbed; shorter ones would mangle text.
const minSecret = 3

// hide adds secret, and its URL-escaped forms, to what is scrubbed.
func (s *scrubber) hide(secret string) {
	for _, v := range []string{secret, url.PathEscape(secret), url.QueryEscape(secret)} {
		if len(v) >= minSecret && !slices.Contains(s.secrets, v) {
			s.secrets = append(s.secrets, v)
		}
	}
}

func (s *scrubber) Write(p []byte) (int, error) {
	if len(s.secrets) == 0 {
		return s.w.Write(p)
	}
	text := string(p)
	for _, v := range s.secrets {
		text = strings.ReplaceAll(text, v, "xxxxx")
	}
	if _, err := io.WriteString(s.w, text); err != nil {
		return 0, err
	}
	return len(p), nil
}
