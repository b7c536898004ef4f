package ui

import (
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"

	"github.com/dblockhq/dblock"
)

// static holds the page's script and style, served as they are; page.html
// is the page's template.
//
//go:embed static page.html
var files embed.FS

var page = template.Must(template.ParseFS(files, "page.html"))

// handler serves the page, its files, the state and force-unlock.
type handler struct {
	l     *dblock.Locker
	cfg   config
	hub   *hub
	token string // the page's CSRF token, required on POST
	mux   *http.ServeMux
}

// Handler returns the page of l's table and what it loads, at these paths
// relative to where it is mounted (mount it under a path that ends in a
// slash, with http.StripPrefix):
//
//	GET  /            the page
//	GET  /static/...  its script and style
//	GET  /state       the state as JSON (what the page shows)
//	GET  /events      the state as server-sent events, at each change
//	GET  /history     ?key=K&since=D: the key's history (dblock.WithHistory)
//	POST /unlock      force-unlock a key (AllowUnlock; same origin and the page's token)
//
// It returns an error for a bad option.
func Handler(l *dblock.Locker, opts ...Option) (http.Handler, error) {
	if l == nil {
		return nil, fmt.Errorf("ui.Handler: nil Locker")
	}
	h := &handler{l: l, cfg: config{interval: DefaultInterval, by: defaultBy}}
	for _, o := range opts {
		if err := o(&h.cfg); err != nil {
			return nil, err
		}
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("ui.Handler: CSRF token: %w", err)
	}
	h.token = hex.EncodeToString(b[:])
	h.hub = newHub(l, &h.cfg)
	static, err := fs.Sub(files, "static")
	if err != nil {
		return nil, err
	}
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", h.page)
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /state", h.state)
	m.HandleFunc("GET /events", h.events)
	m.HandleFunc("GET /history", h.history)
	m.HandleFunc("POST /unlock", h.unlock)
	h.mux = m
	return h, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-store")
	h.mux.ServeHTTP(w, r)
}

// pageData fills page.html.
type pageData struct {
	Token       string
	AllowUnlock bool
	Interval    int64 // ms
}

func (h *handler) page(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := page.Execute(w, pageData{Token: h.token, AllowUnlock: h.cfg.allowUnlock, Interval: h.cfg.interval.Milliseconds()}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

func (h *handler) state(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, read(r.Context(), h.l, h.cfg.permits))
}

// events streams the state as server-sent events ("data: JSON"), at each
// change, until the client goes.
func (h *handler) events(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return // no streaming here: the page falls back to polling state
	}
	ch, done := h.hub.subscribe()
	defer done()
	for {
		select {
		case <-r.Context().Done():
			return
		case b := <-ch:
			if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
