package ui

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// TestPage: the page carries its token and whether force-unlock is on,
// loads its script and style from the handler (no inline script, so the
// Content-Security-Policy holds), and sends no data of the table itself.
func TestPage(t *testing.T) {
	l, _, _ := dbtest.Locker(t, dblock.SQLite)
	hostile := `<script>alert("x")</script>`
	if _, err := l.TryLock(ctxT(t, 10*time.Second), hostile); err != nil {
		t.Fatal(err)
	}
	for _, allow := range []bool{false, true} {
		var opts []Option
		if allow {
			opts = append(opts, AllowUnlock())
		}
		srv, h := serve(t, l, opts...)
		body, r := get(t, srv.Client(), srv.URL+"/")
		if r.StatusCode != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("GET /: %d %q", r.StatusCode, r.Header.Get("Content-Type"))
		}
		if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("Content-Security-Policy %q", csp)
		}
		if !strings.Contains(body, `<meta name="dblock-token" content="`+h.token+`">`) || len(h.token) != 64 {
			t.Errorf("the page does not carry its token %q", h.token)
		}
		if want := `<meta name="dblock-allow-unlock" content="` + map[bool]string{false: "false", true: "true"}[allow] + `">`; !strings.Contains(body, want) {
			t.Errorf("allow %v: the page lacks %s", allow, want)
		}
		if strings.Count(body, "<script") != 1 || !strings.Contains(body, `<script src="static/app.js" defer></script>`) {
			t.Errorf("want one script, loaded from static/app.js: %s", body)
		}
		if strings.Contains(body, "alert") {
			t.Errorf("the page holds a key of the table: %s", body)
		}
		for path, ct := range map[string]string{"/static/app.js": "text/javascript", "/static/app.css": "text/css"} {
			body, r := get(t, srv.Client(), srv.URL+path)
			if r.StatusCode != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), ct) || len(body) < 1000 {
				t.Errorf("GET %s: %d %q, %d bytes", path, r.StatusCode, r.Header.Get("Content-Type"), len(body))
			}
		}
		if js, _ := get(t, srv.Client(), srv.URL+"/static/app.js"); strings.Contains(js, "innerHTML") {
			t.Errorf("app.js uses innerHTML")
		}
		if _, r := get(t, srv.Client(), srv.URL+"/page.html"); r.StatusCode != http.StatusNotFound {
			t.Errorf("GET /page.html: %d, want 404", r.StatusCode)
		}
	}
}

// TestEvents: the events stream pushes the state at once, then each change
// (a release shows within the 2 s the page promises), and the reading
// loop stops when the last page goes.
func TestEvents(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		l, _, _ := dbtest.Locker(t, d)
		srv, h := serve(t, l)
		ctx := ctxT(t, 30*time.Second)
		lk, err := l.TryLock(ctx, "orders", dblock.Owner("alice"))
		if err != nil {
			t.Fatal(err)
		}
		sctx, stop := context.WithCancel(ctx)
		evs := events(sctx, t, srv)
		if st := <-evs; st.Counts.Locks != 1 {
			t.Fatalf("first event: %+v, want orders held", st)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		released := time.Now()
		deadline := time.After(2 * time.Second)
		for done := false; !done; {
			select {
			case st, ok := <-evs:
				if !ok {
					t.Fatal("the event stream ended")
				}
				done = st.Counts.Locks == 0
			case <-deadline:
				t.Fatal("no event showed the release within 2 s")
			}
		}
		t.Logf("the release showed after %v", time.Since(released).Round(time.Millisecond))
		stop()
		for h.hub.isRunning() {
			select {
			case <-ctx.Done():
				t.Fatal("the reading loop runs on with nobody listening")
			case <-time.After(10 * time.Millisecond): // look again
			}
		}
	})
}

// TestUnlock: force-unlock is refused without AllowUnlock, without the
// page's token, from another origin, and by GET; with all of them, it
// breaks the lock (the holder's Done closes) and the history says who did.
func TestUnlock(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		l, on := historyLocker(t, d)
		ctx := ctxT(t, 30*time.Second)
		lk, err := l.TryLock(ctx, "orders", dblock.Owner("alice"))
		if err != nil {
			t.Fatal(err)
		}
		off, _ := serve(t, l)
		if code, body := post(t, off, "orders", off.URL, ""); code != http.StatusForbidden || !strings.Contains(body, "--allow-unlock") {
			t.Errorf("without AllowUnlock: %d %s, want 403 saying how to turn it on", code, body)
		}
		srv, h := serve(t, l, AllowUnlock())
		for _, c := range []struct {
			name, token, origin, site string
			code                      int
		}{
			{"no token", "", srv.URL, "", http.StatusForbidden},
			{"wrong token", strings.Repeat("0", 64), srv.URL, "", http.StatusForbidden},
			{"other origin", h.token, "http://evil.example", "", http.StatusForbidden},
			{"cross-site fetch", h.token, "", "cross-site", http.StatusForbidden},
		} {
			if code, body := post(t, srv, "orders", c.origin, c.site, c.token); code != c.code {
				t.Errorf("%s: %d %s, want %d", c.name, code, body, c.code)
			}
		}
		if _, r := get(t, srv.Client(), srv.URL+"/unlock?key=orders"); r.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("GET unlock: %d, want 405", r.StatusCode)
		}
		if _, err := l.Get(ctx, "orders"); err != nil {
			t.Fatalf("a refused request released the key: %v", err)
		}
		if code, body := post(t, srv, "", srv.URL, "same-origin", h.token); code != http.StatusBadRequest {
			t.Errorf("empty key: %d %s, want 400", code, body)
		}
		if code, body := post(t, srv, "orders", srv.URL, "same-origin", h.token); code != http.StatusOK || !strings.Contains(body, `"owner":"alice"`) {
			t.Fatalf("force-unlock: %d %s, want 200 and alice's lock", code, body)
		}
		select {
		case <-lk.Done():
		case <-ctx.Done():
			t.Fatal("the holder's Done never closed")
		}
		if !errors.Is(lk.Err(), dblock.ErrLockLost) {
			t.Errorf("holder's Err = %v, want ErrLockLost", lk.Err())
		}
		if code, _ := post(t, srv, "orders", srv.URL, "same-origin", h.token); code != http.StatusNotFound {
			t.Errorf("force-unlock of a free key: %d, want 404", code)
		}
		hs, err := l.History(ctx, "orders", time.Time{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !on {
			return // no history there
		}
		if len(hs) != 2 || hs[1].Event != dblock.EventForceUnlocked || !strings.Contains(hs[1].Detail, ", for ui, from 127.0.0.1:") {
			t.Fatalf("history %+v: want acquired, then force-unlocked for ui from this client", hs)
		}
	})
}

// TestHistoryEndpoint: history answers a key's events (none where the
// table keeps no history) and refuses a bad key or stretch.
func TestHistoryEndpoint(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		l, on := historyLocker(t, d)
		ctx := ctxT(t, 30*time.Second)
		lk, err := l.TryLock(ctx, "a/<b>", dblock.Owner("alice"))
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		srv, _ := serve(t, l)
		var h historyJSON
		getJSON(t, srv, "/history?key=a%2F%3Cb%3E&since=5m", http.StatusOK, &h)
		want := 2
		if !on {
			want = 0
		}
		if h.Key != "a/<b>" || len(h.Events) != want || h.NoTable || h.Error != "" || h.Truncated || h.Now.Sub(h.From) != 5*time.Minute {
			t.Fatalf("history: %+v, want %d events", h, want)
		}
		if want > 0 && (h.Events[0].Event != "acquired" || h.Events[1].Event != "released" || h.Events[1].HeldMS == nil || h.Events[0].Owner != "alice") {
			t.Errorf("events %+v", h.Events)
		}
		if on {
			// More events than the page takes: the oldest, marked truncated.
			defer setHistoryLimit(1)()
			var cut historyJSON
			getJSON(t, srv, "/history?key=a%2F%3Cb%3E&since=5m", http.StatusOK, &cut)
			if len(cut.Events) != 1 || cut.Events[0].Event != "acquired" || !cut.Truncated {
				t.Fatalf("history past its limit: %+v, want the first event, truncated", cut)
			}
		}
		for _, q := range []string{"", "?key=", "?key=k&since=-1s", "?key=k&since=8d", "?key=k&since=soon"} {
			var bad historyJSON
			getJSON(t, srv, "/history"+q, http.StatusBadRequest, &bad)
			if bad.Error == "" {
				t.Errorf("history%s: no error said", q)
			}
		}
	})
}

// TestOptions: bad options are refused with an error.
func TestOptions(t *testing.T) {
	l, _, _ := dbtest.Locker(t, dblock.SQLite)
	for name, o := range map[string]Option{
		"Interval(10ms)":        Interval(10 * time.Millisecond),
		"Interval(1h)":          Interval(time.Hour),
		"Permits(0)":            Permits("s", 0),
		"Permits(MaxPermits+1)": Permits("s", dblock.MaxPermits+1),
		"By(nil)":               By(nil),
	} {
		if _, err := Handler(l, o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := Handler(nil); err == nil {
		t.Error("Handler(nil): no error")
	}
}
