package dblock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/faultproxy"
)

// An Unlock that hands the key to a waiter of the same Locker rides out a
// dropped connection as a plain release does: the handover statement's
// connection is cut (every connection goes down as it is sent, and comes
// back at the retry), and Unlock still succeeds, the waiter holding the key
// under a larger token. When the dropped statement had landed (here it is
// run first on another connection), the retry finds the row gone from the
// holder; the waiter gets the key only because the row shows its own memo,
// under the token the landed statement gave. When the row was lost
// meanwhile instead (broken by ForceUnlock), the outcome is unknown:
// Unlock reports ErrNotHeld, never success, and the waiter takes the free
// key itself. The handover used to return the driver's error and leave the
// key blocked for a whole lease.
func TestHandoverRidesOutDroppedConnection(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		for _, before := range []string{"not sent", "landed", "lost meanwhile"} {
			t.Run(before, func(t *testing.T) {
				ctx := ctxT(t, time.Minute)
				admin, direct, table := dbtest.Locker(t, d)
				pdb, p := proxied(t, d)
				// A lease longer than the test: a key left blocked for
				// it fails the test by its deadline.
				l := lockerOn(t, pdb, table, dblock.WithTTL(5*time.Minute))
				attempts := 0
				dblock.BeforeHandoff(l, func(query string, args []any) {
					switch attempts++; attempts {
					case 1:
						switch before {
						case "landed":
							if _, err := direct.ExecContext(ctx, query, args...); err != nil {
								t.Errorf("landing the handover first: %v", err)
							}
						case "lost meanwhile":
							if _, err := admin.ForceUnlock(ctx, "hand"); err != nil {
								t.Errorf("breaking the lock first: %v", err)
							}
						}
						p.SetMode(faultproxy.Down)
					case 2:
						p.SetMode(faultproxy.Forward)
					}
				})
				holder := mustLock(t)(l.TryLock(ctx, "hand"))
				type result struct {
					lk  *dblock.Lock
					err error
				}
				got := make(chan result, 1)
				go func() {
					lk, err := l.Lock(ctx, "hand")
					got <- result{lk, err}
				}()
				waitUntil(t, "the waiter to queue", func() bool { return dblock.QueueLen(l, "hand") == 1 })
				err := holder.Unlock(ctx)
				switch {
				case before == "lost meanwhile" && !errors.Is(err, dblock.ErrNotHeld):
					t.Fatalf("Unlock of a lock lost while its handover's connection dropped: %v, want ErrNotHeld", err)
				case before == "lost meanwhile" && !strings.Contains(err.Error(), "connection failed"):
					t.Fatalf("Unlock = %v; it should say that a failed connection leaves the outcome unknown", err)
				case before != "lost meanwhile" && err != nil:
					t.Fatalf("Unlock handing over through a dropped connection: %v", err)
				}
				if attempts < 2 {
					t.Fatalf("%d handover statements sent, want a retry after the dropped one", attempts)
				}
				r := <-got
				if r.err != nil {
					t.Fatalf("waiter: %v", r.err)
				}
				if r.lk.Token() <= holder.Token() {
					t.Fatalf("waiter's token %d, not above the holder's %d", r.lk.Token(), holder.Token())
				}
				if row, _ := readRow(t, direct, d, table, "hand"); row.token != r.lk.Token() || row.memo != r.lk.Owner() || row.depth != 1 {
					t.Fatalf("row %+v, want the waiter's memo %q and token %d at depth 1", row, r.lk.Owner(), r.lk.Token())
				}
				if err := r.lk.Unlock(ctx); err != nil {
					t.Fatalf("the waiter's Unlock: %v", err)
				}
				if row, _ := readRow(t, direct, d, table, "hand"); row.depth != 0 {
					t.Fatalf("row still held after the waiter's Unlock: %+v", row)
				}
			})
		}
	})
}
