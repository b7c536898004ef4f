package dblock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// TestGaleraNonPrimaryWaits: a Galera node cut off from the others
// (gmcast.isolate) answers every statement with 1047 ("WSREP has not yet
// prepared node for application use"): nothing was done, so a Lock through
// it waits, retrying, and takes the key once the node is back in the
// primary component, instead of failing at the first answer.
func TestGaleraNonPrimaryWaits(t *testing.T) {
	dsns := dbtest.GaleraDSNs(t)
	if len(dsns) < 3 {
		t.Fatalf("DBLOCK_GALERA_DSNS names %d nodes, want 3", len(dsns))
	}
	ctx := ctxT(t, 2*time.Minute)
	// Migrated through node 3 itself: another node's DDL may still be
	// applying there.
	admin := dbtest.OpenMySQL(t, dsns[2])
	table := dbtest.Table(t, admin, dblock.MySQL)
	c := &dbtest.StmtCounter{}
	db, err := dbtest.OpenCounted(dblock.MySQL, dsns[2], c)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l, err := dblock.New(db, dblock.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// The Locker learns the engine while the node is in the cluster.
	lk, err := l.TryLock(ctx, "warm")
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	isolate := func(v int) {
		t.Helper()
		if _, err := admin.ExecContext(ctx, "SET GLOBAL wsrep_provider_options = ?", "gmcast.isolate="+string(rune('0'+v))); err != nil {
			t.Fatal(err)
		}
	}
	ready := func(want string) {
		t.Helper()
		for {
			var name, v string
			if err := admin.QueryRowContext(ctx, "SHOW STATUS LIKE 'wsrep_ready'").Scan(&name, &v); err != nil {
				t.Fatal(err)
			}
			if v == want {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("node 3's wsrep_ready did not become %s", want)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	t.Cleanup(func() {
		_, _ = admin.ExecContext(context.Background(), "SET GLOBAL wsrep_provider_options = 'gmcast.isolate=0'")
		ready("ON")
	})
	isolate(1)
	ready("OFF")
	n0 := c.N()
	type result struct {
		lk  *dblock.Lock
		err error
	}
	res := make(chan result, 1)
	go func() {
		lk, err := l.Lock(ctx, "k")
		res <- result{lk, err}
	}()
	// Two statements sent while the node is isolated: the first one's
	// 1047 was ridden out.
	for tick := time.NewTicker(10 * time.Millisecond); c.N() < n0+2; {
		select {
		case <-tick.C:
		case r := <-res:
			t.Fatalf("Lock through a node outside the primary component = %v, %v before the node came back; want it to wait", r.lk, r.err)
		}
	}
	isolate(0)
	r := <-res
	if r.err != nil {
		t.Fatalf("Lock after node 3 rejoined: %v", r.err)
	}
	if err := r.lk.Unlock(ctx); err != nil {
		t.Errorf("Unlock: %v", err)
	}
}
