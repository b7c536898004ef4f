package main

import (
	"context"
	"database/sql"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/dialect/mysql"
	"github.com/dblockhq/dblock/internal/dialect/postgres"
	"github.com/dblockhq/dblock/internal/dialect/sqlite"
)

// historyJSON is one event of history --json. Times are RFC 3339 by the
// database's clock; held_ms is absent for events that end no lease.
type historyJSON struct {
	ID     int64  `json:"id"`
	Time   string `json:"time"`
	Key    string `json:"key"`
	What   string `json:"what"`
	Event  string `json:"event"`
	Owner  string `json:"owner"`
	Token  int64  `json:"token"`
	Depth  int    `json:"depth"`
	HeldMS *int64 `json:"held_ms,omitempty"`
	Detail string `json:"detail,omitempty"`
}

func cmdHistory(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("history")
	c := addCommon(fs)
	asJSON := fs.Bool("json", false, "print a JSON array")
	since := fs.Duration("since", 0, "only the events of this last stretch of time (default: all kept)")
	limit := fs.Int("limit", 1000, "at most this many events, the oldest first (0: all); stderr says when more were left out")
	if err := a.parseFlags(fs, "dblock history [KEY] [--since D] [--limit N] [--json] [--dsn DSN] [--table NAME]", args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return exitf(exitUsage, "unexpected argument %q", fs.Arg(1))
	}
	if *since < 0 || *limit < 0 {
		return exitf(exitUsage, "--since and --limit cannot be negative")
	}
	l, t, closeAll, err := c.open(ctx, a)
	if err != nil {
		return err
	}
	defer closeAll()
	var from time.Time
	if *since > 0 {
		from = time.Now().Add(-*since)
	}
	ask := *limit
	if ask > 0 {
		ask++ // one more says whether --limit left events out
	}
	hs, err := l.History(ctx, fs.Arg(0), from, ask)
	if err != nil {
		return err
	}
	if on, err := historyOn(ctx, c.db, t.dialect, c.table); err != nil {
		return err
	} else if !on {
		fmt.Fprintf(a.stderr, "dblock history: the history of %s is off: no event is recorded (dblock migrate --history turns it on; not on a distributed engine other than TiDB)\n", c.table)
	}
	if *limit > 0 && len(hs) > *limit {
		hs = hs[:*limit]
		shown := fmt.Sprintf("the oldest %d events", *limit)
		if *limit == 1 {
			shown = "the oldest event"
		}
		fmt.Fprintf(a.stderr, "dblock history: %s shown, and there are more events: narrow with --since, or raise --limit (0: all)\n", shown)
	}
	if *asJSON {
		out := make([]historyJSON, 0, len(hs))
		for _, h := range hs {
			j := historyJSON{ID: h.ID, Time: h.Time.Format(rfc3339ms), Key: h.Key, What: dblock.Describe(h.Key).String(),
				Event: h.Event, Owner: h.Owner, Token: h.Token, Depth: h.Depth, Detail: h.Detail}
			if h.Held >= 0 {
				ms := h.Held.Milliseconds()
				j.HeldMS = &ms
			}
			out = append(out, j)
		}
		return printJSON(a, out)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tKEY\tEVENT\tOWNER\tTOKEN\tDEPTH\tHELD\tDETAIL")
	for _, h := range hs {
		detail := h.Detail
		if detail == "" {
			detail = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", h.Time.Format(rfc3339ms), cell(dblock.Describe(h.Key).String()), h.Event, cell(h.Owner), h.Token, h.Depth, roundDur(h.Held), cell(detail))
	}
	return tw.Flush()
}

// historyOn says whether the history's triggers are on table, which
// history reads: without them it is empty, or stopped when it was turned
// off, and an empty answer would look like nothing happened.
func historyOn(ctx context.Context, db *sql.DB, d dblock.Dialect, table string) (bool, error) {
	build := map[dblock.Dialect]func(dialect.Config) dialect.Dialect{
		dblock.Postgres: postgres.New, dblock.MySQL: mysql.New, dblock.SQLite: sqlite.New,
	}[d]
	if build == nil {
		return false, fmt.Errorf("no dialect %q", d)
	}
	on, err := dialect.HistoryOn(ctx, build(dialect.Config{Table: table}).History(), db)
	if err != nil {
		return false, fmt.Errorf("reading whether the history of %s is on: %w", table, err)
	}
	return on, nil
}
