package main

import (
	"context"
	"os"

	"github.com/dblockhq/dblock"
)

// openWatched opens c's Locker (common.open) for run or elect; a signal
// that comes meanwhile ends it at once, with status 128+N: connecting may
// take long (a stalled server, or a server that restarts: connectRetry).
func openWatched(ctx context.Context, a *app, c *common, r runFlags, sigs <-chan os.Signal) (l *dblock.Locker, closeAll func(), err error) {
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	watched := make(chan struct{})
	var got os.Signal // set by the watcher before watched is closed
	go func() {
		defer close(watched)
		select {
		case got = <-sigs:
			cancel()
		case <-done:
		}
	}()
	l, _, closeAll, err = c.open(octx, a)
	close(done)
	<-watched
	if got != nil {
		if err == nil {
			closeAll()
		}
		return nil, nil, exitf(128+signalNumber(got), "interrupted by %s before %s started, while connecting", signalName(got), r.argv[0])
	}
	return l, closeAll, err
}
