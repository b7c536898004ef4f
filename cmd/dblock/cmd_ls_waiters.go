package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/dblockhq/dblock"
)

// waiterJSON is one waiting call in ls --waiters --json (and in a step of
// ls --blocked --json): what it waits for as Describe says (kind, name,
// what), since when by the database's clock, its FIFO place (0: none),
// the keys it holds while it waits (LockAll's), and its data.
type waiterJSON struct {
	Key       string   `json:"key"`
	What      string   `json:"what"`
	Kind      string   `json:"kind"`
	Name      string   `json:"name"`
	Owner     string   `json:"owner"`
	Since     string   `json:"since"`
	WaitedMS  int64    `json:"waited_ms"`
	Position  int      `json:"position,omitempty"`
	ExpiresAt string   `json:"expires_at"`
	Holds     []string `json:"holds,omitempty"`
	Data      string   `json:"data,omitempty"`
	DataHex   string   `json:"data_hex,omitempty"`
}

func waiterToJSON(w dblock.WaiterInfo) waiterJSON {
	r := w.What()
	j := waiterJSON{Key: w.Key, What: r.String(), Kind: string(r.Kind), Name: r.Name, Owner: w.Owner,
		Since: w.Since.Format(rfc3339ms), WaitedMS: w.Waited.Milliseconds(), Position: w.Position,
		ExpiresAt: w.ExpiresAt.Format(rfc3339ms), Holds: w.Holds()}
	if data := w.Data(); utf8.Valid(data) {
		j.Data = string(data)
	} else {
		j.DataHex = fmt.Sprintf("%x", data)
	}
	return j
}

// chainJSON is one chain of ls --blocked --json.
type chainJSON struct {
	Cycle bool       `json:"cycle"`
	Steps []stepJSON `json:"steps"`
}

type stepJSON struct {
	Waiter  waiterJSON `json:"waiter"`
	Holders []lockJSON `json:"holders"`
}

// lsWaiters prints the calls waiting for key ("": all).
func lsWaiters(ctx context.Context, a *app, l *dblock.Locker, key string, asJSON bool) error {
	ws, err := l.Waiters(ctx, key)
	if err != nil {
		return err
	}
	if asJSON {
		out := make([]waiterJSON, 0, len(ws))
		for _, w := range ws {
			out = append(out, waiterToJSON(w))
		}
		return printJSON(a, out)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WAITS FOR\tKEY\tOWNER\tWAITED\tPOSITION\tHOLDS\tDATA")
	for _, w := range ws {
		pos := "-"
		if w.Position > 0 {
			pos = fmt.Sprint(w.Position)
		}
		holds := cells(w.Holds())
		if holds == "" {
			holds = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(w.What().String()), cell(w.Key), cell(w.Owner), roundDur(w.Waited), pos, holds, shortData(w.Data()))
	}
	return tw.Flush()
}

// lsBlocked prints who blocks whom: one chain per line group, each step a
// waiting call and the holders of what it waits for, indented under the
// step whose holder it is.
func lsBlocked(ctx context.Context, a *app, l *dblock.Locker, asJSON bool) error {
	chains, err := l.Blocked(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		out := make([]chainJSON, 0, len(chains))
		for _, c := range chains {
			cj := chainJSON{Cycle: c.Cycle}
			for _, s := range c.Steps {
				sj := stepJSON{Waiter: waiterToJSON(s.Waiter), Holders: make([]lockJSON, 0, len(s.Holders))}
				for _, h := range s.Holders {
					sj.Holders = append(sj.Holders, toJSON(h))
				}
				cj.Steps = append(cj.Steps, sj)
			}
			out = append(out, cj)
		}
		return printJSON(a, out)
	}
	if len(chains) == 0 {
		fmt.Fprintln(a.stdout, "nothing waits")
		return nil
	}
	for i, c := range chains {
		if i > 0 {
			fmt.Fprintln(a.stdout)
		}
		for depth, s := range c.Steps {
			w := s.Waiter
			fmt.Fprintf(a.stdout, "%s%s waits for %s (%s)", strings.Repeat("  ", depth), cell(w.Owner), cell(w.What().String()), roundDur(w.Waited))
			if holds := w.Holds(); len(holds) > 0 {
				fmt.Fprintf(a.stdout, " holding %s", cells(holds))
			}
			if len(s.Holders) == 0 {
				fmt.Fprintln(a.stdout, ", held by nothing the table shows (freed since, or a transaction's: LockTx)")
				continue
			}
			names := make([]string, len(s.Holders))
			for j, h := range s.Holders {
				names[j] = fmt.Sprintf("%s as %s (token %d, for %s)", cell(h.Owner), cell(dblock.Describe(h.Key).String()), h.Token, roundDur(h.HeldFor))
			}
			fmt.Fprintf(a.stdout, ", held by %s\n", strings.Join(names, "; "))
		}
		if c.Cycle {
			fmt.Fprintf(a.stdout, "%s… and so back to a wait above: a cycle (deadlock) until a wait gives up\n", strings.Repeat("  ", len(c.Steps)))
		}
	}
	return nil
}

// printJSON writes v indented.
func printJSON(a *app, v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// cells joins keys with commas, each as cell shows it.
func cells(keys []string) string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = cell(k)
	}
	return strings.Join(out, ",")
}
