package dblock_test

import (
	"context"
	"testing"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// BenchmarkPrimitives takes and gives back each primitive, uncontended, on
// one Locker, so that each can be read as a ratio to the plain row lock
// ("lock") of the same run:
//
//	go test -run '^$' -bench BenchmarkPrimitives -benchmem -count 3 .
//
// lock: TryLock+Unlock; rlock / wlock: TryRLock / TryWLock + Unlock;
// permit: TryAcquire+Release of a 4-permit Semaphore; lockall: TryLockAll
// of 2 keys + Unlock; campaign: Campaign+Resign of an Election.
func BenchmarkPrimitives(b *testing.B) {
	for _, d := range dbtest.Dialects {
		b.Run(string(d), func(b *testing.B) {
			ctx := context.Background()
			l, _, _ := dbtest.Locker(b, d)
			sem, err := dblock.NewSemaphore(l, "bench", 4)
			if err != nil {
				b.Fatal(err)
			}
			e, err := dblock.NewElection(l, "bench")
			if err != nil {
				b.Fatal(err)
			}
			type release func(context.Context) error
			cases := []struct {
				name string
				take func() (release, error)
			}{
				{"lock", func() (release, error) { lk, err := l.TryLock(ctx, "p"); return lockRelease(lk), err }},
				{"rlock", func() (release, error) { lk, err := l.TryRLock(ctx, "p"); return lockRelease(lk), err }},
				{"wlock", func() (release, error) { lk, err := l.TryWLock(ctx, "p"); return lockRelease(lk), err }},
				{"permit", func() (release, error) {
					p, err := sem.TryAcquire(ctx)
					if err != nil {
						return nil, err
					}
					return p.Release, nil
				}},
				{"lockall", func() (release, error) {
					m, err := l.TryLockAll(ctx, "p/a", "p/b")
					if err != nil {
						return nil, err
					}
					return m.Unlock, nil
				}},
				{"campaign", func() (release, error) {
					term, err := e.Campaign(ctx, []byte("me"))
					if err != nil {
						return nil, err
					}
					return term.Resign, nil
				}},
			}
			for _, c := range cases {
				b.Run(c.name, func(b *testing.B) {
					for b.Loop() {
						rel, err := c.take()
						if err != nil {
							b.Fatal(err)
						}
						if err := rel(ctx); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

func lockRelease(lk *dblock.Lock) func(context.Context) error {
	if lk == nil {
		return nil
	}
	return lk.Unlock
}
