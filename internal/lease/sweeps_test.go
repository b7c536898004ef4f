package lease

import (
	"context"
	"sync"
	"testing"
)

// spawner runs functions as goroutines and waits for them, as a Locker's
// spawn and Close do.
type spawner struct{ wg sync.WaitGroup }

func (s *spawner) spawn(f func()) bool {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
	return true
}

// A sweep whose context ends before its first look is looked at once more
// by Close, which undoes the row it finds; a sweep that settled is not
// looked at again, and Start after Close does nothing.
func TestSweepsClose(t *testing.T) {
	var s Sweeps
	var sp spawner
	var mu sync.Mutex
	looks := map[string]int{}
	undone := map[string]int64{}
	find := func(name string, token int64) func(context.Context) (int64, bool, error) {
		return func(ctx context.Context) (int64, bool, error) {
			mu.Lock()
			defer mu.Unlock()
			looks[name]++
			return token, ctx.Err() == nil, ctx.Err()
		}
	}
	undo := func(name string) func(context.Context, int64) {
		return func(_ context.Context, token int64) {
			mu.Lock()
			defer mu.Unlock()
			undone[name] = token
		}
	}
	failed := func(err error) { t.Error(err) }

	settled := context.Background()
	s.Start(settled, sp.spawn, find("settled", 1), undo("settled"), failed)
	cut, cancel := context.WithCancel(context.Background())
	cancel() // the Locker closing: the sweep ends before its first look
	s.Start(cut, sp.spawn, find("cut", 2), undo("cut"), failed)
	sp.wg.Wait()
	s.Close(context.Background())
	s.Start(settled, func(func()) bool {
		t.Error("Start after Close spawned a sweep")
		return false
	}, find("late", 3), undo("late"), failed)

	if looks["settled"] != 1 || undone["settled"] != 1 {
		t.Errorf("settled sweep: %d looks, undid %d; want 1 look, token 1", looks["settled"], undone["settled"])
	}
	if looks["cut"] != 1 || undone["cut"] != 2 {
		t.Errorf("cut-short sweep: %d looks, undid %d; want Close's one look, token 2", looks["cut"], undone["cut"])
	}
	if looks["late"] != 0 {
		t.Errorf("a sweep started after Close looked %d times", looks["late"])
	}
}
