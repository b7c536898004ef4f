package dblock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func bufferLogger(buf *syncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func TestListHeldLocks(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := context.Background()
		l, _, _ := dbtest.Locker(t, d, dblock.WithTTL(10*time.Second))
		if got, err := l.List(ctx); err != nil || len(got) != 0 {
			t.Fatalf("List on an empty table = %v, %v", got, err)
		}
		a, err := l.TryLock(ctx, "list:a", dblock.Owner("owner-a"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := l.TryLock(ctx, "list:b")
		if err != nil {
			t.Fatal(err)
		}
		// Let the database clock move, then re-enter: HeldFor must count
		// from the first acquisition, not the re-entry.
		const pause = 300 * time.Millisecond
		time.Sleep(pause)
		a2, err := l.TryLock(ctx, "list:a", dblock.Owner("owner-a"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := l.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Key != "list:a" || got[1].Key != "list:b" {
			t.Fatalf("List = %+v, want list:a, list:b in order", got)
		}
		ia, ib := got[0], got[1]
		if ia.Owner != "owner-a" || ia.Depth != 2 || ia.Token != a.Token() {
			t.Errorf("list:a = %+v, want owner-a depth 2 token %d", ia, a.Token())
		}
		if ib.Owner != b.Owner() || ib.Depth != 1 || ib.Token != b.Token() {
			t.Errorf("list:b = %+v, want owner %s depth 1 token %d", ib, b.Owner(), b.Token())
		}
		if ia.HeldFor < pause {
			t.Errorf("list:a HeldFor %v < %v: re-entry reset the acquisition time", ia.HeldFor, pause)
		}
		for _, i := range got {
			if i.ExpiresIn <= 0 || i.ExpiresIn > 10*time.Second {
				t.Errorf("%s ExpiresIn %v, want within (0, 10s]", i.Key, i.ExpiresIn)
			}
		}

		// Released rows are not listed; a new acquisition restarts HeldFor.
		for _, lk := range []*dblock.Lock{a2, a, b} {
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := l.List(ctx); err != nil || len(got) != 0 {
			t.Fatalf("List after Unlock = %+v, %v", got, err)
		}
		a3, err := l.TryLock(ctx, "list:a", dblock.Owner("owner-a"))
		if err != nil {
			t.Fatal(err)
		}
		defer a3.Unlock(ctx)
		got, err = l.List(ctx)
		if err != nil || len(got) != 1 {
			t.Fatalf("List = %+v, %v", got, err)
		}
		if got[0].HeldFor < 0 || got[0].HeldFor >= ia.HeldFor {
			t.Errorf("HeldFor after retaking = %v, want in [0, %v)", got[0].HeldFor, ia.HeldFor)
		}
	})
}

func TestForceUnlock(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := context.Background()
		holder, _, table := dbtest.Locker(t, d, dblock.WithTTL(time.Second))
		var logs syncBuffer
		admin, err := dblock.New(dbtest.Open(t, d), dblock.WithTable(table), dblock.WithLogger(bufferLogger(&logs)))
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close()

		if _, err := admin.ForceUnlock(ctx, "force:k"); !errors.Is(err, dblock.ErrNotHeld) {
			t.Fatalf("ForceUnlock of a free key: %v, want ErrNotHeld", err)
		}
		if _, err := admin.ForceUnlock(ctx, ""); !errors.Is(err, dblock.ErrInvalidKey) {
			t.Fatalf("ForceUnlock of an empty key: %v, want ErrInvalidKey", err)
		}
		lk, err := holder.TryLock(ctx, "force:k")
		if err != nil {
			t.Fatal(err)
		}
		info, err := admin.ForceUnlock(ctx, "force:k")
		if err != nil {
			t.Fatal(err)
		}
		if info.Key != "force:k" || info.Owner != lk.Owner() || info.Token != lk.Token() || info.Depth != 1 {
			t.Errorf("ForceUnlock = %+v, want the holder's owner %s token %d", info, lk.Owner(), lk.Token())
		}
		if log := logs.String(); !strings.Contains(log, "lock broken by hand") || !strings.Contains(log, "pid "+strconv.Itoa(os.Getpid())) {
			t.Errorf("ForceUnlock log = %q, want who broke it", log)
		}
		select {
		case <-lk.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the holder did not notice its lock was broken")
		}
		if err := lk.Err(); !errors.Is(err, dblock.ErrLockLost) || !errors.Is(err, dblock.ErrTakenOver) {
			t.Errorf("holder Err = %v, want ErrLockLost wrapping ErrTakenOver", err)
		}
		err = lk.Unlock(ctx)
		if !errors.Is(err, dblock.ErrNotHeld) {
			t.Errorf("holder Unlock = %v, want ErrNotHeld", err)
		}
		// The message says "dblock: " once, however deep the wrapping.
		for _, e := range []error{lk.Err(), err} {
			if n := strings.Count(e.Error(), "dblock: "); n != 1 {
				t.Errorf("%q says \"dblock: \" %d times, want once", e, n)
			}
		}
		next, err := admin.TryLock(ctx, "force:k")
		if err != nil {
			t.Fatal(err)
		}
		defer next.Unlock(ctx)
		if next.Token() <= lk.Token() {
			t.Errorf("token after a forced release %d, want > %d", next.Token(), lk.Token())
		}
	})
}

// TestMigrationRerun checks that the acquired_time migration can run on a
// table that already has the column (another tool applied it).
func TestMigrationRerun(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := context.Background()
		l, db, table := dbtest.Locker(t, d)
		q := `DELETE FROM "` + table + `_version" WHERE version = 2`
		if d == dblock.MySQL {
			q = strings.ReplaceAll(q, `"`, "`")
		}
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
		if err := dblock.Migrate(ctx, db, dblock.WithTable(table)); err != nil {
			t.Fatalf("Migrate again over an applied version 2: %v", err)
		}
		lk, err := l.TryLock(ctx, "rerun")
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Unlock(ctx)
		got, err := l.List(ctx)
		if err != nil || len(got) != 1 || got[0].HeldFor < 0 {
			t.Fatalf("List = %+v, %v; want one lock with a known HeldFor", got, err)
		}
	})
}
