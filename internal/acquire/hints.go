package acquire

import "sync"

// maxRowHints bounds hints: about 1,024 keys of at most 255 bytes.
const maxRowHints = 1024

// hints remembers keys whose rows a Locker has lately seen in place (it
// acquired them; a released row stays until reaped), so that an acquire
// can try the cheaper update in place first and go straight to the upsert
// for a key it has not seen. A wrong hint costs one statement that changes
// nothing, never a wrong result. When full, it forgets everything at once.
// With each key it may keep the token the row was left with when this
// Locker released it (0 when unknown), which a combined take on MySQL
// relies on (dialect.Batch.NeedsLastToken).
type hints struct {
	mu sync.Mutex
	m  map[string]int64
}

func newHints() *hints { return &hints{m: make(map[string]int64)} }

func (h *hints) add(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.m[key]; !ok {
		h.put(key, 0)
	}
}

// released records that this Locker released key's row, leaving token in it.
func (h *hints) released(key string, token int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.put(key, token)
}

func (h *hints) put(key string, token int64) {
	if _, ok := h.m[key]; !ok && len(h.m) >= maxRowHints {
		clear(h.m)
	}
	h.m[key] = token
}

// lastToken returns the token key's row was left with at this Locker's
// last release of it, or 0.
func (h *hints) lastToken(key string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[key]
}

func (h *hints) has(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.m[key]
	return ok
}

// acquireVia is a dialect's acquire with row hints: a key whose row was
// lately seen is first taken in place; when that takes nothing, a read
// (held) tells a row another owner holds (not acquired, nothing written:
// the upsert's row lock and commit would hold up the holder's release) from
// one that is gone or changed meanwhile. Only then, or for a key not seen
// lately, does the upsert run, which inserts a missing row or settles the
// race with a concurrent insert or release.
func (h *hints) acquireVia(key string,
	take, upsert func() (int64, bool, error), held func() (bool, error)) (int64, bool, error) {
	if h.has(key) {
		if token, ok, err := take(); ok || err != nil {
			return token, ok, err
		}
		if taken, err := held(); taken || err != nil {
			return 0, false, err
		}
	}
	token, ok, err := upsert()
	if err == nil {
		h.add(key) // the row is there now, ours or not
	}
	return token, ok, err
}
