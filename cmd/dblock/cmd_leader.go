package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"unicode/utf8"

	"github.com/dblockhq/dblock"
)

// leaderJSON is one line of leader --json. Times are RFC 3339 by the
// database's clock; value is the leader's value as text when it is UTF-8,
// else value_hex holds it.
type leaderJSON struct {
	Election  string `json:"election"`
	Value     string `json:"value,omitempty"`
	ValueHex  string `json:"value_hex,omitempty"`
	Token     int64  `json:"token"`
	Since     string `json:"since,omitempty"`
	ExpiresAt string `json:"expires_at,omitempty"`
	None      bool   `json:"none,omitempty"` // --watch: the election has no leader
}

func cmdLeader(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("leader")
	c := addCommon(fs)
	watch := fs.Bool("watch", false, "print every change of leader until interrupted")
	asJSON := fs.Bool("json", false, "print JSON, one object per line")
	if err := a.parseFlags(fs, "dblock leader NAME [--watch] [--json] [--dsn DSN] [--table NAME]", args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return exitf(exitUsage, "leader takes one election name")
	}
	if err := checkElectionName(fs.Arg(0)); err != nil {
		return err
	}
	l, _, closeAll, err := c.open(ctx, a)
	if err != nil {
		return err
	}
	defer closeAll()
	e, err := dblock.NewElection(l, fs.Arg(0))
	if err != nil {
		return exitf(exitUsage, "%v", err)
	}
	if !*watch {
		ld, err := e.Leader(ctx)
		if errors.Is(err, dblock.ErrNoLeader) {
			return exitf(exitFailure, "election %q has no leader", e.Name())
		}
		if err != nil {
			return err
		}
		return printLeader(a, e.Name(), ld, *asJSON)
	}
	wctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	for ld := range e.Observe(wctx) {
		if err := printLeader(a, e.Name(), ld, *asJSON); err != nil {
			return err
		}
	}
	return nil // interrupted: watching ends there
}

func printLeader(a *app, name string, ld dblock.Leader, asJSON bool) error {
	if ld.None() {
		if asJSON {
			return json.NewEncoder(a.stdout).Encode(leaderJSON{Election: name, None: true})
		}
		_, err := fmt.Fprintf(a.stdout, "%s: no leader\n", cell(name))
		return err
	}
	j := leaderJSON{Election: name, Token: ld.Token, ExpiresAt: ld.ExpiresAt.Format("2006-01-02T15:04:05.000Z07:00")}
	if !ld.Since.IsZero() {
		j.Since = ld.Since.Format("2006-01-02T15:04:05.000Z07:00")
	}
	if utf8.Valid(ld.Value) {
		j.Value = string(ld.Value)
	} else {
		j.ValueHex = fmt.Sprintf("%x", ld.Value)
	}
	if asJSON {
		return json.NewEncoder(a.stdout).Encode(j)
	}
	value := fmt.Sprintf("%q", j.Value)
	if j.ValueHex != "" {
		value = "0x" + j.ValueHex
	}
	_, err := fmt.Fprintf(a.stdout, "%s: leader %s, token %d, since %s, lease ends %s\n", cell(name), value, j.Token, orDash(j.Since), j.ExpiresAt)
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
