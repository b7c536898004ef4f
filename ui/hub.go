package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/dblockhq/dblock"
)

// hub reads the table every interval while at least one page listens, and
// hands each listener the state whenever it changed. The reading loop runs
// only while there are listeners: a Handler nobody looks at costs nothing.
type hub struct {
	l        *dblock.Locker
	interval time.Duration
	permits  map[string]int

	mu      sync.Mutex
	subs    map[chan []byte]struct{}
	last    []byte        // the latest state sent
	kick    chan struct{} // read now (after a force-unlock)
	running bool
}

func newHub(l *dblock.Locker, c *config) *hub {
	return &hub{l: l, interval: c.interval, permits: c.permits, subs: map[chan []byte]struct{}{}, kick: make(chan struct{}, 1)}
}

// subscribe returns a channel that receives the state, the latest first,
// and a function that ends the subscription. The channel holds one state:
// a slow listener skips to the newest.
func (h *hub) subscribe() (<-chan []byte, func()) {
	ch := make(chan []byte, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs[ch] = struct{}{}
	if h.last != nil {
		ch <- h.last
	}
	if !h.running {
		h.running = true
		go h.loop()
	}
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.subs, ch)
	}
}

// refresh asks the loop to read the table now.
func (h *hub) refresh() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// loop reads and publishes until nobody listens.
func (h *hub) loop() {
	t := time.NewTicker(h.interval)
	defer t.Stop()
	for {
		b := h.snapshot()
		h.mu.Lock()
		if len(h.subs) == 0 {
			h.running, h.last = false, nil
			h.mu.Unlock()
			return
		}
		if !bytes.Equal(b, h.last) {
			h.last = b
			for ch := range h.subs {
				select { // keep only the newest
				case <-ch:
				default:
				}
				ch <- b
			}
		}
		h.mu.Unlock()
		select {
		case <-t.C:
		case <-h.kick:
		}
	}
}

// snapshot reads the state as JSON, within one interval or two seconds,
// whichever is longer.
func (h *hub) snapshot() []byte {
	ctx, cancel := context.WithTimeout(context.Background(), max(2*time.Second, h.interval))
	defer cancel()
	b, err := json.Marshal(read(ctx, h.l, h.permits))
	if err != nil { // cannot happen: the state holds strings and numbers
		panic(err)
	}
	return b
}

// running says whether the reading loop runs.
func (h *hub) isRunning() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.running
}
