package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dberr"
)

// lockJSON is one lock in ls --json, and one line of ls --watch --json
// (with Event). What says what the key stands for (dblock.Describe). Durations are milliseconds and times RFC 3339, by the
// database's clock; held_for_ms and acquired_at are absent when unknown.
// Data is the holder's Data as text, or as hex (data_hex) when it is not
// UTF-8.
type lockJSON struct {
	Event       string `json:"event,omitempty"`
	Key         string `json:"key"`
	What        string `json:"what"`
	Owner       string `json:"owner"`
	Depth       int    `json:"depth"`
	Token       int64  `json:"token"`
	HeldForMS   *int64 `json:"held_for_ms"`
	ExpiresInMS int64  `json:"expires_in_ms"`
	AcquiredAt  string `json:"acquired_at,omitempty"`
	ExpiresAt   string `json:"expires_at,omitempty"`
	Data        string `json:"data,omitempty"`
	DataHex     string `json:"data_hex,omitempty"`
}

const rfc3339ms = "2006-01-02T15:04:05.000Z07:00"

func toJSON(i dblock.LockInfo) lockJSON {
	j := lockJSON{Key: i.Key, What: dblock.Describe(i.Key).String(), Owner: i.Owner, Depth: i.Depth, Token: i.Token, ExpiresInMS: i.ExpiresIn.Milliseconds()}
	if i.HeldFor >= 0 {
		ms := i.HeldFor.Milliseconds()
		j.HeldForMS = &ms
	}
	if !i.AcquiredAt.IsZero() {
		j.AcquiredAt = i.AcquiredAt.Format(rfc3339ms)
	}
	if !i.ExpiresAt.IsZero() {
		j.ExpiresAt = i.ExpiresAt.Format(rfc3339ms)
	}
	if data := i.Data(); utf8.Valid(data) {
		j.Data = string(data)
	} else {
		j.DataHex = fmt.Sprintf("%x", data)
	}
	return j
}

func cmdLs(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("ls")
	c := addCommon(fs)
	c.embeddedOK, c.noteEmbedded = true, true // reading the embedded file is harmless, and said
	asJSON := fs.Bool("json", false, "print a JSON array (with --watch: one JSON object per change)")
	watch := fs.Bool("watch", false, "print every change (acquired, taken, changed, released) until interrupted")
	every := fs.Duration("interval", time.Second, "with --watch: how often to read the table")
	waitersOf := fs.Bool("waiters", false, "list the calls waiting (for KEY, if given), from every process, instead of the holders")
	blocked := fs.Bool("blocked", false, "print who blocks whom: each waiting call, what holds its key, and where that holder waits")
	if err := a.parseFlags(fs, "dblock ls [--json] [--watch [--interval D] | --waiters [KEY] | --blocked] [--dsn DSN] [--table NAME]", args); err != nil {
		return err
	}
	modes := 0
	for _, on := range []bool{*watch, *waitersOf, *blocked} {
		if on {
			modes++
		}
	}
	if modes > 1 {
		return exitf(exitUsage, "--watch, --waiters and --blocked go one at a time")
	}
	if fs.NArg() > 1 || fs.NArg() == 1 && !*waitersOf {
		return exitf(exitUsage, "unexpected argument %q", fs.Arg(fs.NArg()-1))
	}
	if flagSet(fs, "interval") && !*watch {
		return exitf(exitUsage, "--interval needs --watch: it sets how often --watch reads the table")
	}
	if *every <= 0 {
		return exitf(exitUsage, "--interval must be positive, not %v", *every)
	}
	l, _, closeAll, err := c.open(ctx, a)
	if err != nil {
		return err
	}
	defer closeAll()
	if *watch {
		wctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		return watchLocks(wctx, a, l, *every, *asJSON)
	}
	switch {
	case *waitersOf:
		return lsWaiters(ctx, a, l, fs.Arg(0), *asJSON)
	case *blocked:
		return lsBlocked(ctx, a, l, *asJSON)
	}
	infos, err := l.List(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		out := make([]lockJSON, 0, len(infos))
		for _, i := range infos {
			out = append(out, toJSON(i))
		}
		return printJSON(a, out)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tOWNER\tDEPTH\tTOKEN\tHELD FOR\tEXPIRES IN\tDATA")
	for _, i := range infos {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", cell(i.Key), cell(i.Owner), i.Depth, i.Token, roundDur(i.HeldFor), roundDur(i.ExpiresIn), shortData(i.Data()))
	}
	return tw.Flush()
}

// watchLocks lists the table every interval and prints what changed since
// the last look: "held" for every lock at the start, then "acquired" (a key
// newly held), "taken" (held under a new token), "changed" (same token, new
// depth or data) and "released" (no longer held). It returns nil when ctx
// ends (interrupted); a failed read is reported on stderr and tried again,
// but for a first one that will not heal by itself (a missing table, a
// missing privilege), which ends it as ls would.
func watchLocks(ctx context.Context, a *app, l *dblock.Locker, every time.Duration, asJSON bool) error {
	var last map[string]dblock.LockInfo
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		infos, err := l.List(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && last == nil && !dberr.Transient(err) {
			return err
		}
		if err != nil {
			_, line := a.describe(err) // as ls says it: a missing table, "run "dblock migrate" first"
			fmt.Fprintf(a.stderr, "dblock ls: %s (trying again)\n", unprefixed(line))
		} else {
			now := make(map[string]dblock.LockInfo, len(infos))
			for _, i := range infos {
				now[i.Key] = i
			}
			for _, ev := range diffLocks(last, now) {
				if err := printEvent(a, ev, asJSON); err != nil {
					return err
				}
			}
			last = now
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

type lockEvent struct {
	kind string
	info dblock.LockInfo
}

// diffLocks returns the changes from before to now, sorted by key; before
// nil means the first look.
func diffLocks(before, now map[string]dblock.LockInfo) []lockEvent {
	var out []lockEvent
	for k, i := range now {
		b, ok := before[k]
		switch {
		case before == nil:
			out = append(out, lockEvent{"held", i})
		case !ok:
			out = append(out, lockEvent{"acquired", i})
		case b.Token != i.Token || b.Owner != i.Owner:
			out = append(out, lockEvent{"taken", i})
		case b.Depth != i.Depth || string(b.Data()) != string(i.Data()):
			out = append(out, lockEvent{"changed", i})
		}
	}
	for k, b := range before {
		if _, ok := now[k]; !ok {
			out = append(out, lockEvent{"released", b})
		}
	}
	slices.SortFunc(out, func(x, y lockEvent) int { return strings.Compare(x.info.Key, y.info.Key) })
	return out
}

func printEvent(a *app, ev lockEvent, asJSON bool) error {
	if asJSON {
		j := toJSON(ev.info)
		j.Event = ev.kind
		return json.NewEncoder(a.stdout).Encode(j)
	}
	i := ev.info
	if ev.kind == "released" {
		_, err := fmt.Fprintf(a.stdout, "released %s (token %d)\n", cell(i.Key), i.Token)
		return err
	}
	_, err := fmt.Fprintf(a.stdout, "%s %s owner %s depth %d token %d expires in %s%s\n",
		ev.kind, cell(i.Key), cell(i.Owner), i.Depth, i.Token, roundDur(i.ExpiresIn), dataSuffix(i.Data()))
	return err
}

func dataSuffix(data []byte) string {
	if len(data) == 0 {
		return ""
	}
	return " data " + shortData(data)
}

// shortData prints data for a table: quoted text or hex, at most 40 bytes.
func shortData(data []byte) string {
	if len(data) == 0 {
		return "-"
	}
	more := ""
	if len(data) > 40 {
		data, more = data[:40], "…"
	}
	if utf8.Valid(data) {
		return fmt.Sprintf("%q%s", data, more)
	}
	return fmt.Sprintf("0x%x%s", data, more)
}

// cell is s as a column of a text table or a line: quoted when it holds
// a character that is not printable (a newline or a tab would break the
// row or shift its columns), as it is otherwise. --json prints s as it is.
func cell(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// roundDur prints d to the millisecond, or "-" when unknown (negative).
func roundDur(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return d.Round(time.Millisecond).String()
}
