package mysql

import (
	"context"
	"strings"

	"github.com/dblockhq/dblock/internal/dialect"
)

// Batch implements dialect.Dialect.
func (m *mysqlDialect) Batch() dialect.Batch { return myBatch{m} }

// myBatch combines takes in place and releases at depth 1 in one statement.
type myBatch struct{ m *mysqlDialect }

func (myBatch) Shared() bool { return true }

func (myBatch) NeedsLastToken() bool { return true }

// Many implements dialect.Batch.
func (b myBatch) Many(ctx context.Context, q dialect.Querier, cs []*dialect.Call) {
	b.m.batch(ctx, q, cs)
}

// batch runs takes in place and releases at depth 1 as one statement
// (cycleMany). A take brings the token its Locker left in the row
// (the core keeps it) and gets that plus one. When the statement changes a
// row for every call, each call was done; otherwise confirmMany finds which
// were. A take not done reports not taken (the acquire goes on through the
// upsert); a release not done runs alone (its key may be held deeper, or
// lost: then it reports false).
func (m *mysqlDialect) batch(ctx context.Context, q dialect.Querier, cs []*dialect.Call) {
	dialect.SortByKey(cs)
	pc := dialect.Padded(cs)
	var ms int64
	for _, c := range cs {
		if !c.Release {
			ms = c.TTL.Milliseconds()
		}
	}
	args := make([]any, 0, 7*len(pc)+1)
	args = dialect.AppendArgs(args, pc, func(c *dialect.Call) []any { return []any{c.Key, c.Owner} })
	args = append(args, ms)
	args = appendKeys(args, pc)
	args = dialect.AppendArgs(args, pc, func(c *dialect.Call) []any {
		if c.Release {
			return []any{c.Key, c.Token, 1, c.Owner}
		}
		return []any{c.Key, c.Token, 0, ""}
	})
	var done map[string]bool
	run := func(q dialect.Querier) error {
		res, err := q.ExecContext(ctx, m.cycleMany.Text(len(pc)), args...)
		var changed int64
		if err == nil {
			changed, err = res.RowsAffected()
		}
		if err == nil && changed != int64(len(cs)) {
			done, err = m.confirm(ctx, q, pc)
		}
		return err
	}
	var err error
	if hasRelease(cs) {
		// A release's outcome is read in the statement's transaction: once
		// committed, another Locker may take the key, and the read would
		// take a release that was done for one that was not.
		err = dialect.InTx(ctx, q, run)
	} else {
		err = run(q) // a take confirmed later finds the row as it left it
	}
	for _, c := range cs {
		if !c.Release {
			c.Token++
		}
		c.OK, c.Err = err == nil && (done == nil || done[c.Key]), err
		switch {
		case err != nil:
		case c.OK && c.Release:
			c.Freed = true
		case c.OK:
		case c.Release: // not done: held deeper, or lost
			c.OK, c.Freed, c.Err = m.Release(ctx, q, c.Key, c.Owner, c.Token)
		default: // not taken: the acquire goes on through the upsert
			c.Token = 0
		}
	}
}

// hasRelease reports whether cs holds a release.
func hasRelease(cs []*dialect.Call) bool {
	for _, c := range cs {
		if c.Release {
			return true
		}
	}
	return false
}

// confirm returns the keys of the calls of pc (padded) that cycleMany did.
func (m *mysqlDialect) confirm(ctx context.Context, q dialect.Querier, pc []*dialect.Call) (map[string]bool, error) {
	args := dialect.AppendArgs(appendKeys(make([]any, 0, 5*len(pc)), pc), pc, func(c *dialect.Call) []any {
		if c.Release {
			return []any{c.Key, c.Owner, c.Token, 0}
		}
		return []any{c.Key, c.Owner, c.Token + 1, 1}
	})
	rows, err := q.QueryContext(ctx, m.confirmMany.Text(len(pc)), args...)
	if err != nil {
		return nil, err
	}
	keys, err := dialect.ScanStrings(rows)
	done := make(map[string]bool, len(keys))
	for _, k := range keys {
		done[k] = true
	}
	return done, err
}

// appendKeys appends each call's key, and NULL for a nil call (padded).
func appendKeys(args []any, cs []*dialect.Call) []any {
	return dialect.AppendArgs(args, cs, func(c *dialect.Call) []any { return []any{c.Key} })
}

// batchSQL fills a combined statement's lists for n calls: {keys}, {refs}
// of ref placeholders and {whens} (CASE key_id WHEN ? THEN ?).
func batchSQL(query string, n int, ref string) string {
	return strings.NewReplacer("{keys}", dialect.Placeholders("?", n), "{refs}", dialect.Placeholders(ref, n),
		"{whens}", strings.Repeat("WHEN ? THEN ? ", n)).Replace(query)
}
