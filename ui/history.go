package ui

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/dblockhq/dblock"
)

// Bounds of the history the page asks for.
const (
	defaultSince = time.Hour
	maxSince     = 7 * 24 * time.Hour
)

// historyLimit is how many events of a key the page gets at most, the
// oldest of its stretch (a variable for the tests).
var historyLimit = 5000

// historyJSON answers GET history?key=K&since=D: the key's events of the
// last D (default an hour), oldest first, for the page's timeline.
// Events is empty too when the table keeps no history (not migrated
// WithHistory, or an engine without it), which the page's note says.
type historyJSON struct {
	Key     string         `json:"key"`
	What    string         `json:"what"`
	From    time.Time      `json:"from"`
	Now     time.Time      `json:"now"`
	Events  []historyEvent `json:"events"`
	NoTable bool           `json:"no_table,omitempty"` // the table has no history table (schema older than 6)
	// Truncated says that the stretch has more events than historyLimit:
	// Events holds its oldest.
	Truncated bool   `json:"truncated,omitempty"`
	Error     string `json:"error,omitempty"`
}

type historyEvent struct {
	Time   time.Time `json:"time"`
	Event  string    `json:"event"`
	Owner  string    `json:"owner"`
	Token  int64     `json:"token"`
	Depth  int       `json:"depth"`
	HeldMS *int64    `json:"held_ms"`
	Detail string    `json:"detail,omitempty"`
}

func (h *handler) history(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("key")
	if err := dblock.ValidateKey(key); err != nil {
		writeJSON(w, http.StatusBadRequest, historyJSON{Key: key, Events: []historyEvent{}, Error: err.Error()})
		return
	}
	since := defaultSince
	if s := r.URL.Query().Get("since"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 || d > maxSince {
			writeJSON(w, http.StatusBadRequest, historyJSON{Key: key, Events: []historyEvent{},
				Error: "since: want a duration from 1s to " + strconv.Itoa(int(maxSince/time.Hour)) + "h, such as 15m"})
			return
		}
		since = d
	}
	now := time.Now().UTC()
	out := historyJSON{Key: key, What: dblock.Describe(key).String(), From: now.Add(-since), Now: now, Events: []historyEvent{}}
	hs, err := h.l.History(r.Context(), key, out.From, historyLimit+1) // one more says whether there are more
	if len(hs) > historyLimit {
		hs, out.Truncated = hs[:historyLimit], true
	}
	switch {
	case errors.Is(err, dblock.ErrNoSchema):
		out.NoTable = true
	case err != nil:
		out.Error = err.Error()
		writeJSON(w, http.StatusInternalServerError, out)
		return
	}
	for _, e := range hs {
		ev := historyEvent{Time: e.Time, Event: e.Event, Owner: e.Owner, Token: e.Token, Depth: e.Depth, Detail: e.Detail}
		if e.Held >= 0 {
			ms := e.Held.Milliseconds()
			ev.HeldMS = &ms
		}
		out.Events = append(out.Events, ev)
	}
	writeJSON(w, http.StatusOK, out)
}
