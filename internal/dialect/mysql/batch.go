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
// were, and settle what it cannot see. A take not done reports not taken
// (the acquire goes on through the upsert); a release not done runs alone
// (its key may be held deeper, or lost: then it reports false).
func (m *mysqlDialect) batch(ctx context.Context, q dialect.Querier, cs []*dialect.Call) {
	if v, err := m.on(ctx, q); err == nil {
		m = v // MariaDB's cycleMany does not wait for row locks
	}
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
	var keys []string
	if m.journal != nil {
		keys = make([]string, len(cs))
		for i, c := range cs {
			keys[i] = c.Key
		}
	}
	res, err := m.exec(ctx, q, keys, m.cycleMany.Text(len(pc)), args...)
	if err != nil && lockedErr(err) == nil {
		// Another transaction holds one of the rows locked (mariaNoWait):
		// that call's key is held or busy, the others may not be. Each
		// runs alone.
		for _, c := range cs {
			if c.Release {
				c.OK, c.Freed, c.Err = m.Release(ctx, q, c.Key, c.Owner, c.Token)
			} else {
				c.Token, c.OK, c.Err = m.Take(ctx, q, c.Key, c.Owner, c.TTL, nil, c.Token)
			}
		}
		return
	}
	var changed int64
	if err == nil {
		changed, err = res.RowsAffected()
	}
	if err == nil && changed != int64(len(cs)) {
		if done, err = m.confirm(ctx, q, pc); err == nil {
			settle(cs, done, changed)
		}
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

// settle decides the releases that confirm could not see. The statement
// committed before confirm read, so a key it released may have been taken
// again meanwhile (on a contended key, often): its row then no longer
// shows the release. Takes are always seen (only this call's fresh memo
// is at its new token, and the caller has not returned yet), so the rows
// the statement changed, less the takes seen, are the releases done: when
// that is all of them, every release was done; when it is those seen, the
// others were not. Only in between (a release whose lease had ended, next
// to one whose key was taken again at once) do the unseen releases stay
// not done: each then runs alone and reports the key not held. A
// transaction around the statement and the read would settle that case
// too, at three round trips instead of one for every combined release.
func settle(cs []*dialect.Call, done map[string]bool, changed int64) {
	var takes, releases int64
	for _, c := range cs {
		switch {
		case c.Release:
			releases++
		case done[c.Key]:
			takes++
		}
	}
	if changed-takes != releases {
		return
	}
	for _, c := range cs {
		if c.Release {
			done[c.Key] = true
		}
	}
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
