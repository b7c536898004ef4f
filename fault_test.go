package dblock_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/faultproxy"
)

// faultSetup is a holder whose connections go through a fault proxy and a
// rival Locker on a direct pool, both on one fresh table.
type faultSetup struct {
	proxy     *faultproxy.Proxy
	holder    *dblock.Locker
	rival     *dblock.Locker
	logs      *logRecorder // the holder's
	rivalLogs *logRecorder
}

func newFaultSetup(t *testing.T, d dblock.Dialect, ttl time.Duration) faultSetup {
	t.Helper()
	db := dbtest.Open(t, d)
	table := dbtest.Table(t, db, d)
	pdb, p := proxied(t, d)
	logs, rivalLogs := newLogRecorder(), newLogRecorder()
	return faultSetup{
		proxy:  p,
		holder: lockerOn(t, pdb, table, dblock.WithTTL(ttl), dblock.WithLogger(slog.New(logs)), dblock.WarnEvery(0)),
		rival: lockerOn(t, db, table, dblock.WithTTL(ttl), dblock.WithLogger(slog.New(rivalLogs)),
			dblock.WithRetry(2*time.Millisecond, 10*time.Millisecond)),
		logs:      logs,
		rivalLogs: rivalLogs,
	}
}

// TestLostBeforeTakeover cuts, then separately stalls, the holder's path to
// the database: its Done must fire, with ErrLeaseExpired, before the rival
// (polling all along) acquires the key.
func TestLostBeforeTakeover(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		for _, mode := range []faultproxy.Mode{faultproxy.Down, faultproxy.Stall} {
			name := map[faultproxy.Mode]string{faultproxy.Down: "cut", faultproxy.Stall: "stall"}[mode]
			t.Run(name, func(t *testing.T) {
				const ttl = time.Second
				s := newFaultSetup(t, d, ttl)
				lk, err := s.holder.TryLock(context.Background(), "k")
				if err != nil {
					t.Fatal(err)
				}
				faultAt := time.Now()
				s.proxy.SetMode(mode)

				ctx, cancel := context.WithTimeout(context.Background(), 10*ttl)
				defer cancel()
				got, err := s.rival.Lock(ctx, "k")
				acquiredAt := time.Now()
				if err != nil {
					t.Fatalf("rival: %v", err)
				}
				select {
				case <-lk.Done():
				default:
					t.Fatalf("rival acquired %v after the fault while the holder's Done was still open", acquiredAt.Sub(faultAt))
				}
				// The holder logs the loss right after closing Done, and the
				// rival its acquisition right after the statement returned.
				fired := s.logs.await(t, "lock lost", time.Second).Time
				acquiredAt = s.rivalLogs.await(t, "acquired", time.Second).Time
				t.Logf("%s: Done fired %v after the fault, rival acquired %v after it (%v later); cause: %v",
					name, fired.Sub(faultAt), acquiredAt.Sub(faultAt), acquiredAt.Sub(fired), lk.Err())
				if !fired.Before(acquiredAt) {
					t.Fatalf("Done fired at %v, not before the rival acquired at %v", fired.Sub(faultAt), acquiredAt.Sub(faultAt))
				}
				if err := lk.Err(); !errors.Is(err, dblock.ErrLockLost) || !errors.Is(err, dblock.ErrLeaseExpired) {
					t.Fatalf("Err = %v; want ErrLockLost wrapping ErrLeaseExpired", err)
				}
				if got.Token() <= lk.Token() {
					t.Fatalf("rival's token %d not above the lost holder's %d", got.Token(), lk.Token())
				}
			})
		}
	})
}

// TestFailedBeatsKeepLock makes renewals fail twice (connections cut and
// refused), then lets them through: the lock must survive. The lease is
// 2 s: with 1 s, the renewal after the faults had about 300 ms to open a
// connection through the proxy, and once, in a race-enabled run on a slow
// machine, did not.
func TestFailedBeatsKeepLock(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		const ttl = 2 * time.Second
		s := newFaultSetup(t, d, ttl)
		lk, err := s.holder.TryLock(context.Background(), "k")
		if err != nil {
			t.Fatal(err)
		}
		s.proxy.SetMode(faultproxy.Down)
		const failures = 2
		for range failures {
			s.logs.await(t, "renewal failed", ttl)
		}
		s.proxy.SetMode(faultproxy.Forward)
		n := assertHeldFor(t, lk, s.rival, 3*ttl)
		t.Logf("lock survived %d failed renewals; %d takeover attempts over %v refused", failures, n, 3*ttl)
		if err := lk.Unlock(context.Background()); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	})
}
