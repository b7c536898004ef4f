package advisory

import "time"

// idleProbes is how many probe intervals a session may wait in the idle
// list before it goes back to the pool.
const idleProbes = 2

// probeLoop is the Locker's only goroutine: every probe interval it checks
// the connection of each held lock, one after the other, and hands back
// sessions idle for too long.
func (l *Locker) probeLoop() {
	defer close(l.probeDone)
	t := time.NewTicker(l.cfg.probe)
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		}
		for _, lk := range l.heldLocks() {
			if l.ctx.Err() != nil {
				return
			}
			if err := lk.probe(); err != nil {
				lk.lose(err)
			}
		}
		l.dropIdle(time.Now().Add(-idleProbes * l.cfg.probe))
	}
}
