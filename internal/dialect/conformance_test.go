package dialect_test

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/dialect/mysql"
	"github.com/dblockhq/dblock/internal/dialect/postgres"
	"github.com/dblockhq/dblock/internal/dialect/sqlite"
)

// builders are the dialects under test, by the name the root package gives
// them.
var builders = map[dblock.Dialect]func(dialect.Config) dialect.Dialect{
	dblock.Postgres: postgres.New,
	dblock.MySQL:    mysql.New,
	dblock.SQLite:   sqlite.New,
}

// TestConformance runs the one contract of internal/dialect against every
// dialect, method by method, on a freshly migrated table of a real
// database: what the core relies on, whatever the database.
//
// On the servers it runs twice: as the dialect chooses by the server's
// engine, and in portable mode (plain SQL only: no trigger, advisory lock
// or notification), for the distributed engines that cannot run here; on
// MySQL a third time with the DSN's clientFoundRows.
func TestConformance(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, name dblock.Dialect) {
		conformance(t, name, false)
		if name != dblock.SQLite {
			t.Run("portable", func(t *testing.T) { conformance(t, name, true) })
		}
		if name == dblock.MySQL {
			// A row found but not changed counts as affected: the acquire
			// must still tell a held key from a taken one (on TiDB it
			// reads the acquisition back).
			t.Run("clientFoundRows", func(t *testing.T) { conformance(t, name, false, "clientFoundRows=true") })
		}
	})
}

func conformance(t *testing.T, name dblock.Dialect, portable bool, params ...string) {
	db := dbtest.Open(t, name, params...)
	var opts []dblock.Option
	if portable {
		opts = append(opts, dblock.WithPortable())
	}
	table := dbtest.Table(t, db, name, opts...)
	d := builders[name](dialect.Config{Table: table, Portable: portable})
	if d.Name() != string(name) {
		t.Fatalf("Name() = %q, want %q", d.Name(), name)
	}
	for _, c := range []struct {
		name string
		fn   func(t *testing.T, c conf)
	}{
		{"exclusion", confExclusion},
		{"reentry", confReentry},
		{"take", confTake},
		{"handoff", confHandoff},
		{"renew", confRenew},
		{"extend", confExtend},
		{"reap", confReap},
		{"admin", confAdmin},
		{"linger", confLinger},
		{"batch", confBatch},
		{"tx", confTx},
		{"data", confData},
		{"takeAny", confTakeAny},
		{"heldKeys", confHeldKeys},
		{"classify", confClassify},
		{"handDelete", confHandDelete},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c.fn(t, conf{ctx: ctx, d: d, db: db, key: c.name + "/k", table: table, portable: portable})
		})
	}
}

// conf is one case's dialect, database and key of its own.
type conf struct {
	ctx context.Context
	d   dialect.Dialect
	db  *sql.DB
	key string
	// The lock table, and whether the dialect runs in portable mode.
	table    string
	portable bool
}

// upsert takes key for owner and fails the test unless it was taken.
func (c conf) upsert(t *testing.T, key, owner string) int64 {
	t.Helper()
	token, ok, err := c.d.Upsert(c.ctx, c.db, key, owner, time.Hour, nil)
	if err != nil || !ok || token <= 0 {
		t.Fatalf("Upsert(%q, %q) = %d, %v, %v; want a token", key, owner, token, ok, err)
	}
	return token
}

// release releases one level and fails the test unless it was ours.
func (c conf) release(t *testing.T, key, owner string, token int64) {
	t.Helper()
	if ok, _, err := c.d.Release(c.ctx, c.db, key, owner, token); !ok || err != nil {
		t.Fatalf("Release(%q, %q, %d) = %v, %v; want released", key, owner, token, ok, err)
	}
}

func confExclusion(t *testing.T, c conf) {
	a := c.upsert(t, c.key, "a")
	if token, ok, err := c.d.Upsert(c.ctx, c.db, c.key, "b", time.Hour, nil); ok || err != nil {
		t.Errorf("Upsert by another owner = %d, %v, %v; want not taken", token, ok, err)
	}
	if token, held, err := c.d.Held(c.ctx, c.db, c.key, "b"); !held || err != nil || token != a {
		t.Errorf("Held for another owner = %d, %v, %v; want true, token %d", token, held, err, a)
	}
	if _, held, err := c.d.Held(c.ctx, c.db, c.key, "a"); held || err != nil {
		t.Errorf("Held for the holder = %v, %v; want false", held, err)
	}
	if ok, _, err := c.d.Release(c.ctx, c.db, c.key, "b", 1); ok || err != nil {
		t.Errorf("Release by another owner = %v, %v; want refused", ok, err)
	}
}

func confReentry(t *testing.T, c conf) {
	first := c.upsert(t, c.key, "a")
	if again := c.upsert(t, c.key, "a"); again != first {
		t.Errorf("re-entry token %d, want the acquisition's %d", again, first)
	}
	c.release(t, c.key, "a", first) // depth 2 → 1
	if _, held, _ := c.d.Held(c.ctx, c.db, c.key, "b"); !held {
		t.Error("free after one of two releases")
	}
	c.release(t, c.key, "a", first) // depth 1 → 0
	if ok, _, err := c.d.Release(c.ctx, c.db, c.key, "a", first); ok || err != nil {
		t.Errorf("third Release = %v, %v; want not held", ok, err)
	}
	if next := c.upsert(t, c.key, "b"); next <= first {
		t.Errorf("token after release %d, not above %d", next, first)
	}
}

func confTake(t *testing.T, c conf) {
	if !c.d.TakesInPlace() {
		t.Skip("this dialect always upserts")
	}
	if token, ok, err := c.d.Take(c.ctx, c.db, c.key, "a", time.Hour, nil, 0); ok || err != nil {
		t.Fatalf("Take of a missing row = %d, %v, %v; want not taken", token, ok, err)
	}
	first := c.upsert(t, c.key, "a")
	c.release(t, c.key, "a", first)
	token, ok, err := c.d.Take(c.ctx, c.db, c.key, "b", time.Hour, nil, first)
	if err != nil || !ok || token <= first {
		t.Fatalf("Take of a released row = %d, %v, %v; want a token above %d", token, ok, err, first)
	}
	if _, ok, err := c.d.Take(c.ctx, c.db, c.key, "c", time.Hour, nil, token); ok || err != nil {
		t.Errorf("Take of a held row = %v, %v; want not taken", ok, err)
	}
}

func confHandoff(t *testing.T, c conf) {
	first := c.upsert(t, c.key, "a")
	next, ok, err := c.d.Handoff(c.ctx, c.db, c.key, "a", first, "b", time.Hour, nil)
	if err != nil || !ok || next <= first {
		t.Fatalf("Handoff = %d, %v, %v; want a token above %d", next, ok, err, first)
	}
	if ok, _, _ := c.d.Release(c.ctx, c.db, c.key, "a", first); ok {
		t.Error("the old holder released after handing over")
	}
	if _, ok, err := c.d.Handoff(c.ctx, c.db, c.key, "a", first, "c", time.Hour, nil); ok || err != nil {
		t.Errorf("Handoff of an acquisition handed over already = %v, %v; want refused", ok, err)
	}
	c.release(t, c.key, "b", next)
}

func confRenew(t *testing.T, c conf) {
	live := []dialect.Ref{{Key: c.key + "1"}, {Key: c.key + "2"}}
	for i := range live {
		live[i].Token = c.upsert(t, live[i].Key, "a")
	}
	gone := dialect.Ref{Key: c.key + "gone", Token: 1}
	stale := dialect.Ref{Key: live[0].Key, Token: live[0].Token + 1000}
	lost, busy, err := c.d.Renew(c.ctx, c.db, append(slices.Clone(live), gone, stale))
	if err != nil || len(busy) != 0 {
		t.Fatalf("Renew = busy %v, %v", busy, err)
	}
	slices.SortFunc(lost, func(a, b dialect.Ref) int { return strings.Compare(a.Key, b.Key) })
	if len(lost) != 2 || lost[0] != stale || lost[1] != gone {
		t.Errorf("Renew lost %v, want %v and %v", lost, stale, gone)
	}
}

// confExtend: Extend renews one acquisition and lengthens its lease, never
// shortens it, and later renewals keep the length it set.
func confExtend(t *testing.T, c conf) {
	token, ok, err := c.d.Upsert(c.ctx, c.db, c.key, "a", 10*time.Second, nil)
	if err != nil || !ok {
		t.Fatalf("Upsert = %v, %v", ok, err)
	}
	ref := dialect.Ref{Key: c.key, Token: token}
	expiresIn := func(what string) time.Duration {
		t.Helper()
		info, ok, err := c.d.Get(c.ctx, c.db, c.key)
		if err != nil || !ok || info.Token != token {
			t.Fatalf("Get after %s = %+v, %v, %v; want the acquisition %d", what, info, ok, err, token)
		}
		return info.ExpiresIn
	}
	if in := expiresIn("Upsert"); in > 10*time.Second {
		t.Fatalf("lease of a 10s acquisition ends in %v", in)
	}
	if lost, busy, err := c.d.Extend(c.ctx, c.db, ref, time.Hour); lost || busy || err != nil {
		t.Fatalf("Extend = lost %v, busy %v, %v; want renewed", lost, busy, err)
	}
	if in := expiresIn("Extend"); in < 50*time.Minute {
		t.Errorf("Extend by an hour: the lease ends in %v", in)
	}
	if lost, busy, err := c.d.Extend(c.ctx, c.db, ref, time.Second); lost || busy || err != nil {
		t.Fatalf("shorter Extend = lost %v, busy %v, %v; want renewed", lost, busy, err)
	}
	if _, busy, err := c.d.Renew(c.ctx, c.db, []dialect.Ref{ref}); len(busy) != 0 || err != nil {
		t.Fatalf("Renew = busy %v, %v", busy, err)
	}
	if in := expiresIn("a shorter Extend and a Renew"); in < 50*time.Minute {
		t.Errorf("the lease was shortened: it ends in %v", in)
	}
	stale := dialect.Ref{Key: c.key, Token: token + 1000}
	if lost, _, err := c.d.Extend(c.ctx, c.db, stale, time.Hour); !lost || err != nil {
		t.Errorf("Extend of another acquisition = lost %v, %v; want lost", lost, err)
	}
	if lost, _, err := c.d.Extend(c.ctx, c.db, dialect.Ref{Key: c.key + "gone", Token: 1}, time.Hour); !lost || err != nil {
		t.Errorf("Extend of a missing row = lost %v, %v; want lost", lost, err)
	}
	c.release(t, c.key, "a", token)
	if lost, _, err := c.d.Extend(c.ctx, c.db, ref, time.Hour); !lost || err != nil {
		t.Errorf("Extend of a released acquisition = lost %v, %v; want lost", lost, err)
	}
}

func confReap(t *testing.T, c conf) {
	token := c.upsert(t, c.key, "a")
	for range 3 { // a token above a fresh row's, where tokens count per key
		c.release(t, c.key, "a", token)
		token = c.upsert(t, c.key, "a")
	}
	held := c.upsert(t, c.key+"held", "a")
	c.release(t, c.key, "a", token)
	keys, err := c.d.Reap(c.ctx, c.db, dialect.ReapBatch)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(keys, c.key) || slices.Contains(keys, c.key+"held") {
		t.Errorf("Reap = %v; want the released %q, not the held one", keys, c.key)
	}
	if next := c.upsert(t, c.key, "b"); next <= max(token, held) {
		t.Errorf("token of a reaped key %d, not above %d", next, max(token, held))
	}
}

func confAdmin(t *testing.T, c conf) {
	token := c.upsert(t, c.key, "a")
	c.upsert(t, c.key, "a")
	infos, err := c.d.List(c.ctx, c.db)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(infos, func(i dialect.Info) bool { return i.Key == c.key })
	if i < 0 || infos[i].Owner != "a" || infos[i].Depth != 2 || infos[i].Token != token || infos[i].ExpiresIn <= 0 {
		t.Fatalf("List = %+v; want %q held by a at depth 2, token %d", infos, c.key, token)
	}
	if !slices.IsSortedFunc(infos, func(a, b dialect.Info) int { return strings.Compare(a.Key, b.Key) }) {
		t.Errorf("List not sorted by key: %+v", infos)
	}
	info, ok, err := c.d.ForceRelease(c.ctx, c.db, c.key)
	if err != nil || !ok || info.Owner != "a" || info.Token != token {
		t.Fatalf("ForceRelease = %+v, %v, %v; want a's acquisition", info, ok, err)
	}
	if _, ok, err := c.d.ForceRelease(c.ctx, c.db, c.key); ok || err != nil {
		t.Errorf("second ForceRelease = %v, %v; want nothing held", ok, err)
	}
}

func confLinger(t *testing.T, c conf) {
	token := c.upsert(t, c.key, "a")
	if ok, err := c.d.Linger(c.ctx, c.db, c.key, "a", token, time.Hour); !ok || err != nil {
		t.Fatalf("Linger = %v, %v; want the lease set", ok, err)
	}
	if _, held, _ := c.d.Held(c.ctx, c.db, c.key, "b"); !held {
		t.Error("key free after Linger of an hour")
	}
	if ok, err := c.d.Linger(c.ctx, c.db, c.key, "a", token+1, time.Hour); ok || err != nil {
		t.Errorf("Linger of another acquisition = %v, %v; want refused", ok, err)
	}
}

func confBatch(t *testing.T, c conf) {
	b := c.d.Batch()
	if b == nil {
		t.Skip("this dialect combines nothing")
	}
	keys := []string{c.key + "2", c.key + "1"} // not in key order
	last := map[string]int64{}
	for _, k := range keys {
		token := c.upsert(t, k, "a")
		c.release(t, k, "a", token)
		last[k] = token
	}
	takes := make([]*dialect.Call, len(keys))
	for i, k := range keys {
		takes[i] = &dialect.Call{Key: k, Owner: "b", TTL: time.Hour}
		if b.NeedsLastToken() {
			takes[i].Token = last[k]
		}
	}
	b.Many(c.ctx, c.db, slices.Clone(takes))
	for _, call := range takes {
		if !call.OK || call.Err != nil || call.Token <= last[call.Key] {
			t.Fatalf("combined take %+v; want taken with a token above %d", call, last[call.Key])
		}
	}
	releases := make([]*dialect.Call, len(takes))
	for i, tk := range takes {
		releases[i] = &dialect.Call{Key: tk.Key, Owner: "b", Token: tk.Token, Release: true}
	}
	b.Many(c.ctx, c.db, slices.Clone(releases))
	for _, call := range releases {
		if !call.OK || call.Err != nil {
			t.Errorf("combined release %+v; want released", call)
		}
	}
}

func confTx(t *testing.T, c conf) {
	x := c.d.Tx()
	if x == nil {
		t.Skip("this dialect has no locks inside transactions")
	}
	tx, err := c.db.BeginTx(c.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if token, ok, err := x.LockTx(c.ctx, c.db, dialect.SQLTx(tx), c.key, true); !ok || err != nil || token <= 0 {
		t.Fatalf("LockTx of a free key = %d, %v, %v; want taken", token, ok, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	token := c.upsert(t, c.key, "a")
	tx2, err := c.db.BeginTx(c.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx2.Rollback() }()
	if ok, err := x.CheckTx(c.ctx, c.db, dialect.SQLTx(tx2), c.key, "a", token); !ok || err != nil {
		t.Errorf("CheckTx of a live lock = %v, %v; want live", ok, err)
	}
	if ok, err := x.CheckTx(c.ctx, c.db, dialect.SQLTx(tx2), c.key, "a", token+1); ok || err != nil {
		t.Errorf("CheckTx of another token = %v, %v; want not live", ok, err)
	}
	if _, ok, err := x.LockTx(c.ctx, c.db, dialect.SQLTx(tx2), c.key, true); ok || (err != nil && !errors.Is(err, dialect.ErrLocked)) {
		t.Errorf("LockTx of a leased key = %v, %v; want not taken", ok, err)
	}
}

func confData(t *testing.T, c conf) {
	if _, ok, err := c.d.Get(c.ctx, c.db, c.key); ok || err != nil {
		t.Fatalf("Get of a free key = %v, %v; want nothing", ok, err)
	}
	value := []byte{0, 'v', 0xff}
	token, ok, err := c.d.Upsert(c.ctx, c.db, c.key, "a", time.Hour, value)
	if err != nil || !ok {
		t.Fatalf("Upsert with data = %v, %v", ok, err)
	}
	info, ok, err := c.d.Get(c.ctx, c.db, c.key)
	if err != nil || !ok || string(info.Data) != string(value) || info.Token != token || info.AcquiredAt.IsZero() || !info.ExpiresAt.After(info.AcquiredAt) {
		t.Fatalf("Get = %+v, %v, %v; want a's lock with its data and times", info, ok, err)
	}
	if ok, err := c.d.SetData(c.ctx, c.db, c.key, "a", token, []byte("w")); !ok || err != nil {
		t.Fatalf("SetData = %v, %v", ok, err)
	}
	if ok, err := c.d.SetData(c.ctx, c.db, c.key, "a", token, []byte("w")); !ok || err != nil {
		t.Errorf("SetData of the value it has = %v, %v; want done", ok, err)
	}
	if ok, err := c.d.SetData(c.ctx, c.db, c.key, "b", token, []byte("x")); ok || err != nil {
		t.Errorf("SetData by another owner = %v, %v; want refused", ok, err)
	}
	if info, _, _ := c.d.Get(c.ctx, c.db, c.key); string(info.Data) != "w" {
		t.Errorf("data after SetData = %q", info.Data)
	}
	c.release(t, c.key, "a", token)
	next, ok, err := c.d.Upsert(c.ctx, c.db, c.key, "b", time.Hour, nil)
	if err != nil || !ok {
		t.Fatal(err)
	}
	if info, _, _ := c.d.Get(c.ctx, c.db, c.key); info.Data != nil || info.Token != next {
		t.Errorf("a fresh acquisition without data shows %q", info.Data)
	}
}

func confTakeAny(t *testing.T, c conf) {
	keys := []string{c.key + "0", c.key + "1", c.key + "2"}
	if _, _, ok, err := c.d.TakeAny(c.ctx, c.db, keys, "a", time.Hour); ok || err != nil {
		t.Fatalf("TakeAny with no rows = %v, %v; want nothing taken", ok, err)
	}
	if n, err := c.d.Ensure(c.ctx, c.db, keys); n != 3 || err != nil {
		t.Fatalf("Ensure = %d, %v; want 3 rows created", n, err)
	}
	if n, err := c.d.Ensure(c.ctx, c.db, keys); n != 0 || err != nil {
		t.Fatalf("Ensure again = %d, %v; want none", n, err)
	}
	taken := map[string]int64{}
	for _, owner := range []string{"a", "b", "c"} {
		key, token, ok, err := c.d.TakeAny(c.ctx, c.db, keys, owner, time.Hour)
		if err != nil || !ok || token <= 0 || taken[key] != 0 || !slices.Contains(keys, key) {
			t.Fatalf("TakeAny for %s = %q %d %v %v; taken so far %v", owner, key, token, ok, err, taken)
		}
		taken[key] = token
		if info, ok, _ := c.d.Get(c.ctx, c.db, key); !ok || info.Owner != owner || info.Token != token {
			t.Errorf("Get %q after TakeAny = %+v, want %s's", key, info, owner)
		}
	}
	if _, _, ok, err := c.d.TakeAny(c.ctx, c.db, keys, "d", time.Hour); ok || err != nil {
		t.Fatalf("TakeAny with every row held = %v, %v", ok, err)
	}
	info, _, _ := c.d.Get(c.ctx, c.db, keys[1])
	c.release(t, keys[1], info.Owner, info.Token)
	key, token, ok, err := c.d.TakeAny(c.ctx, c.db, keys, "d", time.Hour)
	if err != nil || !ok || key != keys[1] || token <= taken[keys[1]] {
		t.Errorf("TakeAny after a release = %q %d %v %v; want %q above %d", key, token, ok, err, keys[1], taken[keys[1]])
	}
}

func confHeldKeys(t *testing.T, c conf) {
	keys := []string{c.key + "0", c.key + "1", c.key + "2"}
	heldKeys := func(owner string) []string {
		t.Helper()
		held, err := c.d.HeldKeys(c.ctx, c.db, keys, owner)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(held)
		return held
	}
	heldAny := func(owner string) bool { return len(heldKeys(owner)) > 0 }
	if heldAny("b") {
		t.Fatal("HeldKeys with no rows = true")
	}
	token := c.upsert(t, keys[1], "a")
	if !heldAny("b") || heldAny("a") {
		t.Errorf("HeldKeys with %q held by a: for b %v, for a %v; want true, false", keys[1], heldAny("b"), heldAny("a"))
	}
	c.release(t, keys[1], "a", token)
	if heldAny("b") {
		t.Errorf("HeldKeys after the release = true")
	}
	c.upsert(t, keys[2], "c")
	c.upsert(t, keys[0], "a")
	if got := heldKeys("a"); !slices.Equal(got, keys[2:]) {
		t.Errorf("HeldKeys for a = %q, want %q (c's)", got, keys[2:])
	}
	if got := heldKeys(""); !slices.Equal(got, []string{keys[0], keys[2]}) {
		t.Errorf("HeldKeys for anyone = %q, want %q", got, []string{keys[0], keys[2]})
	}
	// Lists of every length (MySQL pads them) find the same.
	for n := range 6 {
		list := append(slices.Repeat([]string{c.key + "x"}, n), keys[2])
		if got, err := c.d.HeldKeys(c.ctx, c.db, list, ""); err != nil || !slices.Equal(got, keys[2:]) {
			t.Errorf("HeldKeys of %d keys = %q, %v; want %q", len(list), got, err, keys[2:])
		}
	}
}

func confClassify(t *testing.T, c conf) {
	if got := c.d.Classify(context.Canceled); got != dialect.Other {
		t.Errorf("Classify(context.Canceled) = %d, want Other", got)
	}
	missing := builders[dblock.Dialect(c.d.Name())](dialect.Config{Table: dbtest.TableName()})
	_, _, err := missing.Upsert(c.ctx, c.db, c.key, "a", time.Hour, nil)
	if got := c.d.Classify(err); err == nil || got != dialect.NoTable {
		t.Errorf("Upsert on a missing table: %v, class %d; want NoTable", err, got)
	}
	if q := c.d.Quote("t_x"); !strings.Contains(q, "t_x") || len(q) != len("t_x")+2 {
		t.Errorf("Quote(t_x) = %q", q)
	}
	kinds := c.d.Kinds()
	if !slices.Contains(slices.Collect(maps.Values(kinds)), "upsert") || !slices.Contains(slices.Collect(maps.Values(kinds)), "release") {
		t.Errorf("Kinds = %v; want upsert and release named", kinds)
	}
}

// confHandDelete: rows deleted by hand (not by Reap, which raises the
// fence) move no key's tokens back, whichever statement creates the key's
// row again: the acquire's upsert, LockTx's create (outside the
// transaction) and Ensure's, for a semaphore. Each key is first taken in
// place a few times, so its token is above the fence's floor + 1.
func confHandDelete(t *testing.T, c conf) {
	if c.d.Name() == dialect.MySQL {
		e, err := dialect.DetectEngine(c.ctx, c.db, dialect.MySQL)
		if err != nil {
			t.Fatal(err)
		}
		if e != dialect.EngineTiDB && (c.portable || e.Distributed()) {
			t.Skip("MySQL or MariaDB without the fence's trigger: a row deleted by hand starts again from the fence")
		}
	}
	up, inTx, sem := c.key+"up", c.key+"tx", c.key+"sem"
	last := map[string]int64{}
	check := func(what, key string, token int64) {
		t.Helper()
		if token <= last[key] {
			t.Fatalf("%s %q: token %d after %d", what, key, token, last[key])
		}
		last[key] = token
	}
	cycle := func() {
		t.Helper()
		token := c.upsert(t, up, "a")
		check("Upsert", up, token)
		c.release(t, up, "a", token)
		if x := c.d.Tx(); x != nil {
			tx, err := c.db.BeginTx(c.ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
			if err != nil {
				t.Fatal(err)
			}
			token, ok, err := x.LockTx(c.ctx, c.db, dialect.SQLTx(tx), inTx, true)
			if err != nil || !ok {
				_ = tx.Rollback()
				t.Fatalf("LockTx = %v, %v", ok, err)
			}
			check("LockTx", inTx, token)
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.d.Ensure(c.ctx, c.db, []string{sem}); err != nil {
			t.Fatal(err)
		}
		key, token, ok, err := c.d.TakeAny(c.ctx, c.db, []string{sem}, "a", time.Hour)
		if err != nil || !ok || key != sem {
			t.Fatalf("TakeAny = %q, %v, %v", key, ok, err)
		}
		check("TakeAny", sem, token)
		c.release(t, sem, "a", token)
	}
	for range 3 {
		for range 4 {
			cycle()
		}
		del := "DELETE FROM " + c.d.Quote(c.table) + " WHERE key_id IN (?, ?, ?)"
		if c.d.Name() == dialect.Postgres {
			del = "DELETE FROM " + c.d.Quote(c.table) + " WHERE key_id IN ($1, $2, $3)"
		}
		if _, err := c.db.ExecContext(c.ctx, del, up, inTx, sem); err != nil {
			t.Fatal(err)
		}
		cycle()
	}
}
