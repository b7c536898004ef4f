package lease

import (
	"context"
	"errors"
	"testing"
	"time"
)

func goSpawn(f func()) bool {
	go f()
	return true
}

// A caller that leaves gets its context's error at once; the statement
// runs on, and a key it took is undone. One that stays gets the outcome.
func TestDetached(t *testing.T) {
	out, started := Detached(context.Background(), goSpawn, func(context.Context) Outcome {
		return Outcome{Token: 7, OK: true}
	}, func(int64) { t.Error("undo of an outcome the caller got") })
	if !started || out.Token != 7 || !out.OK {
		t.Fatalf("outcome %+v (started %v), want token 7", out, started)
	}

	ctx, cancel := context.WithCancel(context.Background())
	running, release := make(chan struct{}), make(chan struct{})
	undone := make(chan int64, 1)
	go func() {
		<-running
		cancel()
	}()
	out, _ = Detached(ctx, goSpawn, func(sctx context.Context) Outcome {
		close(running)
		<-release
		if sctx.Err() != nil {
			t.Error("the statement's context ended with the caller's")
		}
		return Outcome{Token: 8, OK: true}
	}, func(token int64) { undone <- token })
	if !errors.Is(out.Err, context.Canceled) {
		t.Fatalf("caller that left got %+v, want its context's error", out)
	}
	close(release)
	select {
	case tok := <-undone:
		if tok != 8 {
			t.Fatalf("undid token %d, want 8", tok)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the key taken after the caller left was not undone")
	}

	if _, started := Detached(context.Background(), func(func()) bool { return false }, nil, nil); started {
		t.Fatal("started although spawn refused")
	}
}

// A sweep looks until it finds the row, then undoes it.
func TestSweep(t *testing.T) {
	looks := 0
	var undone int64
	Sweep(context.Background(), func(context.Context) (int64, bool, error) {
		if looks++; looks < 3 {
			return 0, false, nil
		}
		return 9, true, nil
	}, func(_ context.Context, token int64) { undone = token }, func(err error) { t.Error(err) })
	if looks != 3 || undone != 9 {
		t.Fatalf("%d looks, undid %d; want 3 looks, then token 9", looks, undone)
	}
}
