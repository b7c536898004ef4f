package dblock

import "sync"

// maxRowHints bounds rowHints: about 1,024 keys of at most 255 bytes.
const maxRowHints = 1024

// rowHints remembers keys whose rows a Locker has lately seen in place (it
// acquired them; a released row stays until reaped), so that an acquire
// can try the cheaper update in place first and go straight to the upsert
// for a key it has not seen. A wrong hint costs one statement that changes
// nothing, never a wrong result. When full, it forgets everything at once.
type rowHints struct {
	mu sync.Mutex
	m  map[string]struct{}
}

func newRowHints() *rowHints { return &rowHints{m: make(map[string]struct{})} }

func (h *rowHints) add(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.m[key]; ok {
		return
	}
	if len(h.m) >= maxRowHints {
		clear(h.m)
	}
	h.m[key] = struct{}{}
}

func (h *rowHints) has(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.m[key]
	return ok
}
