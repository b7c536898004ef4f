package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"
)

// lockJSON is one line of ls --json. Durations are milliseconds by the
// database's clock; held_for_ms is null when unknown.
type lockJSON struct {
	Key         string `json:"key"`
	Owner       string `json:"owner"`
	Depth       int    `json:"depth"`
	Token       int64  `json:"token"`
	HeldForMS   *int64 `json:"held_for_ms"`
	ExpiresInMS int64  `json:"expires_in_ms"`
}

func cmdLs(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("ls")
	c := addCommon(fs)
	asJSON := fs.Bool("json", false, "print a JSON array")
	if err := a.parseFlags(fs, "dblock ls [--json] [--dsn DSN] [--table NAME]", args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return exitf(exitUsage, "unexpected argument %q", fs.Arg(0))
	}
	l, _, closeAll, err := c.open(ctx, a)
	if err != nil {
		return err
	}
	defer closeAll()
	infos, err := l.List(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		out := make([]lockJSON, 0, len(infos))
		for _, i := range infos {
			j := lockJSON{Key: i.Key, Owner: i.Owner, Depth: i.Depth, Token: i.Token, ExpiresInMS: i.ExpiresIn.Milliseconds()}
			if i.HeldFor >= 0 {
				ms := i.HeldFor.Milliseconds()
				j.HeldForMS = &ms
			}
			out = append(out, j)
		}
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tOWNER\tDEPTH\tTOKEN\tHELD FOR\tEXPIRES IN")
	for _, i := range infos {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", i.Key, i.Owner, i.Depth, i.Token, roundDur(i.HeldFor), roundDur(i.ExpiresIn))
	}
	return tw.Flush()
}

// roundDur prints d to the millisecond, or "-" when unknown (negative).
func roundDur(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return d.Round(time.Millisecond).String()
}
