package dblock_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// A lock's Data is readable by anyone through Get and List while it is
// held; a re-entry without Data keeps it, with Data replaces it; a fresh
// acquisition without Data (alone or combined) has none; Get of a free key
// is ErrNotHeld.
func TestDataAndGet(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		l, _, table := dbtest.Locker(t, d, dblock.WithTTL(time.Minute))
		reader, _ := newLocker(t, d, table)
		value := bytes.Repeat([]byte{0, 1, 2, 0xff}, 100) // binary, with NULs
		lk := mustLock(t)(l.TryLock(ctx, "job", dblock.Owner("w1"), dblock.Data(value)))
		info, err := reader.Get(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(info.Data(), value) || info.Owner != "w1" || info.Token != lk.Token() || info.Depth != 1 {
			t.Fatalf("Get = %+v (data %d bytes); want w1's lock with its data", info, len(info.Data()))
		}
		if info.AcquiredAt.IsZero() || !info.ExpiresAt.After(info.AcquiredAt) || info.ExpiresIn <= 0 {
			t.Errorf("Get times: acquired %v, expires %v (in %v); want a lease ending after its start", info.AcquiredAt, info.ExpiresAt, info.ExpiresIn)
		}
		again := mustLock(t)(l.TryLock(ctx, "job", dblock.Owner("w1")))
		if info, _ := reader.Get(ctx, "job"); !bytes.Equal(info.Data(), value) || info.Depth != 2 {
			t.Errorf("after a re-entry without Data: %+v, want the data kept at depth 2", info)
		}
		third := mustLock(t)(l.TryLock(ctx, "job", dblock.Owner("w1"), dblock.Data([]byte("v2"))))
		infos, err := reader.List(ctx)
		if err != nil || len(infos) != 1 || string(infos[0].Data()) != "v2" {
			t.Fatalf("List after a re-entry with Data = %+v, %v; want the new value", infos, err)
		}
		for _, k := range []*dblock.Lock{third, again, lk} {
			if err := k.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := reader.Get(ctx, "job"); !errors.Is(err, dblock.ErrNotHeld) {
			t.Fatalf("Get of a released key = %v, want ErrNotHeld", err)
		}
		// A fresh acquisition without Data, on the row that held data.
		for range 2 {
			plain := mustLock(t)(l.TryLock(ctx, "job"))
			if info, err := reader.Get(ctx, "job"); err != nil || info.Data() != nil {
				t.Fatalf("Get after an acquisition without Data = %+v, %v; want no data", info, err)
			}
			if err := plain.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := l.TryLock(ctx, "big", dblock.Data(make([]byte, dblock.MaxDataLen+1))); !errors.Is(err, dblock.ErrInvalidOption) {
			t.Errorf("Data over MaxDataLen = %v, want ErrInvalidOption", err)
		}
		full := mustLock(t)(l.TryLock(ctx, "big", dblock.Data(bytes.Repeat([]byte("x"), dblock.MaxDataLen))))
		if info, err := reader.Get(ctx, "big"); err != nil || len(info.Data()) != dblock.MaxDataLen {
			t.Errorf("Get of MaxDataLen bytes = %d bytes, %v", len(info.Data()), err)
		}
		_ = full.Unlock(ctx)
		if _, err := reader.Get(ctx, strings.Repeat("k", dblock.MaxKeyLen+1)); !errors.Is(err, dblock.ErrInvalidKey) {
			t.Errorf("Get of an over-long key = %v, want ErrInvalidKey", err)
		}
	})
}

// A key handed over to a waiter of the same Locker carries the waiter's
// Data, not the holder's.
func TestDataHandover(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		l, _, _ := dbtest.Locker(t, d, dblock.WithTTL(time.Minute))
		lk := mustLock(t)(l.TryLock(ctx, "h", dblock.Data([]byte("first"))))
		got := make(chan *dblock.Lock, 1)
		go func() {
			w, err := l.Lock(ctx, "h", dblock.Data([]byte("second")))
			if err != nil {
				t.Error(err)
			}
			got <- w
		}()
		waitUntil(t, "the waiter queued", func() bool { return dblock.QueueLen(l, "h") == 1 })
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		w := <-got
		if w == nil {
			t.FailNow()
		}
		info, err := l.Get(ctx, "h")
		if err != nil || string(info.Data()) != "second" || info.Token != w.Token() {
			t.Fatalf("after the handover Get = %+v (data %q), %v; want the waiter's", info, info.Data(), err)
		}
		_ = w.Unlock(ctx)
	})
}

// MaxHold ends a lock that its holder keeps renewing: Done closes with
// ErrMaxHold and the row is released, so another Locker takes the key long
// before the lease would end.
func TestMaxHold(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, 30*time.Second)
		l, _, table := dbtest.Locker(t, d, dblock.WithTTL(time.Minute))
		other, _ := newLocker(t, d, table)
		lk := mustLock(t)(l.TryLock(ctx, "m", dblock.MaxHold(200*time.Millisecond)))
		<-lk.Done()
		if err := lk.Err(); !errors.Is(err, dblock.ErrMaxHold) || errors.Is(err, dblock.ErrLockLost) {
			t.Fatalf("Err after MaxHold = %v, want ErrMaxHold (not lost)", err)
		}
		// The release follows Done; Lock waits for it, well within ctx
		// while the lease (a minute) would outlast ctx.
		next, err := other.Lock(ctx, "m")
		if err != nil {
			t.Fatalf("Lock after the holder's MaxHold: %v; the row was not released", err)
		}
		if next.Token() <= lk.Token() {
			t.Errorf("token %d after MaxHold, not above %d", next.Token(), lk.Token())
		}
		if err := lk.Unlock(ctx); !errors.Is(err, dblock.ErrNotHeld) || !errors.Is(err, dblock.ErrMaxHold) {
			t.Errorf("Unlock after MaxHold = %v, want ErrNotHeld wrapping ErrMaxHold", err)
		}
		_ = next.Unlock(ctx)
		if _, err := l.TryLock(ctx, "m", dblock.MaxHold(0)); !errors.Is(err, dblock.ErrInvalidOption) {
			t.Errorf("MaxHold(0) = %v, want ErrInvalidOption", err)
		}
		// Unlocked before its MaxHold: nothing happens later.
		early := mustLock(t)(l.TryLock(ctx, "e", dblock.MaxHold(time.Hour)))
		if err := early.Unlock(ctx); err != nil || !errors.Is(early.Err(), dblock.ErrReleased) {
			t.Errorf("Unlock before MaxHold = %v, Err %v", err, early.Err())
		}
	})
}

// TestDoMaxHold: Do whose lock its MaxHold ended returns an error that
// says so first, wrapping ErrMaxHold (the documented sentinel) and still
// ErrNotHeld (the lock was no longer held when fn returned), never
// ErrLockLost: the lock was released on purpose. Before, the error led
// with "lock not held", which Do's doc gives for a lost lock.
func TestDoMaxHold(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, 30*time.Second)
		l, _, _ := dbtest.Locker(t, d, dblock.WithTTL(time.Minute))
		var cause error
		err := l.Do(ctx, "do-m", func(fctx context.Context) error {
			<-fctx.Done() // ended by MaxHold, long before ctx or the lease
			cause = context.Cause(fctx)
			return nil
		}, dblock.MaxHold(100*time.Millisecond))
		if !errors.Is(cause, dblock.ErrMaxHold) {
			t.Fatalf("fn's context ended with %v, want ErrMaxHold", cause)
		}
		if !errors.Is(err, dblock.ErrMaxHold) || !errors.Is(err, dblock.ErrNotHeld) || errors.Is(err, dblock.ErrLockLost) {
			t.Fatalf("Do past MaxHold = %v, want ErrMaxHold (and ErrNotHeld), not ErrLockLost", err)
		}
		if !strings.HasPrefix(err.Error(), dblock.ErrMaxHold.Error()) || !prefixedOnce(err) {
			t.Errorf("Do past MaxHold = %q, want it to begin %q, prefixed \"dblock: \" once", err, dblock.ErrMaxHold)
		}
		// fn's error comes first, joined with the MaxHold's.
		ferr := errors.New("job failed")
		err = l.Do(ctx, "do-m", func(fctx context.Context) error {
			<-fctx.Done()
			return ferr
		}, dblock.MaxHold(100*time.Millisecond))
		if !errors.Is(err, ferr) || !errors.Is(err, dblock.ErrMaxHold) {
			t.Errorf("Do past MaxHold with fn's error = %v, want both", err)
		}
	})
}

// Migrating a live table from version 3 to 4 (the data column) while
// locks are held and renewed: the holders keep their locks through it
// (renewals and releases never name the new column, as in older dblocks),
// and Data works once it is done.
func TestMigrateLiveTable(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		l, db, table := dbtest.Locker(t, d, dblock.WithTTL(2*time.Second))
		held := []*dblock.Lock{mustLock(t)(l.TryLock(ctx, "a")), mustLock(t)(l.TryLock(ctx, "b"))}
		drop := "ALTER TABLE " + quote(d, table) + " DROP COLUMN data"
		mustExec(t, db, drop)
		mustExec(t, db, "DELETE FROM "+quote(d, table+"_version")+" WHERE version >= 4") // and the versions after it
		if _, err := l.TryLock(ctx, "c", dblock.Data([]byte("x"))); !errors.Is(err, dblock.ErrNoSchema) {
			t.Fatalf("TryLock with Data on a version-3 table = %v, want ErrNoSchema", err)
		}
		if err := dblock.Migrate(ctx, db, dblock.WithTable(table)); err != nil {
			t.Fatal(err)
		}
		// Held across the migration and renewed after it: the lease left
		// grows again.
		first, err := l.Get(ctx, "a")
		if err != nil {
			t.Fatalf("a not held after the migration: %v", err)
		}
		eventually(t, 30*time.Second, 50*time.Millisecond, "a renewal after the migration", func() bool {
			info, err := l.Get(ctx, "a")
			return err == nil && info.ExpiresIn > first.ExpiresIn
		})
		for _, lk := range held {
			if err := lk.Err(); err != nil {
				t.Fatalf("%s lost across the migration: %v", lk.Key(), err)
			}
		}
		lk := mustLock(t)(l.TryLock(ctx, "c", dblock.Data([]byte("x"))))
		if info, err := l.Get(ctx, "c"); err != nil || string(info.Data()) != "x" {
			t.Fatalf("Get after the migration = %+v, %v", info, err)
		}
		for _, k := range append(held, lk) {
			if err := k.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}
