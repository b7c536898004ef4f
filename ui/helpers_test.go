package ui

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// serve starts an httptest server of Handler(l, opts...), closed at cleanup.
func serve(t *testing.T, l *dblock.Locker, opts ...Option) (*httptest.Server, *handler) {
	t.Helper()
	h, err := Handler(l, opts...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, h.(*handler)
}

// ctxT is a context that ends after d or with the test.
func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// getState reads GET state.
func getState(t *testing.T, srv *httptest.Server) state {
	t.Helper()
	r, err := srv.Client().Get(srv.URL + "/state")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var st state
	if err := json.NewDecoder(r.Body).Decode(&st); err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("GET state: %d, %v", r.StatusCode, err)
	}
	if st.Error != "" {
		t.Fatalf("GET state: error %q", st.Error)
	}
	return st
}

// awaitState reads the state until ok says yes, or fails the test when
// ctx ends.
func awaitState(ctx context.Context, t *testing.T, srv *httptest.Server, what string, ok func(state) bool) state {
	t.Helper()
	for {
		st := getState(t, srv)
		if ok(st) {
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("state never showed %s; last: %+v", what, st)
		case <-time.After(20 * time.Millisecond): // the next read
		}
	}
}

// find returns the group of kind and name.
func find(st state, kind, name string) (group, bool) {
	for _, g := range st.Groups {
		if g.Kind == kind && g.Name == name {
			return g, true
		}
	}
	return group{}, false
}

// events reads the server-sent events of srv into the returned channel
// until ctx ends.
func events(ctx context.Context, t *testing.T, srv *httptest.Server) <-chan state {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/events", nil)
	r, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := r.Header.Get("Content-Type"); r.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("GET events: %d, %q", r.StatusCode, ct)
	}
	out := make(chan state)
	go func() {
		defer r.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(r.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var st state
			if err := json.Unmarshal([]byte(data), &st); err != nil {
				t.Errorf("event %q: %v", data, err)
				return
			}
			select {
			case out <- st:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// get returns the body of GET url and the response.
func get(t *testing.T, c *http.Client, url string) (string, *http.Response) {
	t.Helper()
	r, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), r
}

// historyLocker returns a Locker on a fresh table of d with its history on
// where the engine has one (not TiDB), and whether it has.
func historyLocker(t *testing.T, d dblock.Dialect) (*dblock.Locker, bool) {
	t.Helper()
	db := dbtest.Open(t, d)
	var opts []dblock.Option
	on := d != dblock.MySQL || !dbtest.Engine(t, db, d).Distributed()
	if on {
		opts = append(opts, dblock.WithHistory())
	}
	table := dbtest.Table(t, db, d, opts...)
	l, err := dblock.New(db, dblock.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, on
}

// getJSON decodes GET path into v, checking the status.
func getJSON(t *testing.T, srv *httptest.Server, path string, code int, v any) {
	t.Helper()
	r, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	if err := json.NewDecoder(r.Body).Decode(v); err != nil || r.StatusCode != code {
		t.Fatalf("GET %s: %d, %v; want %d", path, r.StatusCode, err, code)
	}
}

// post asks srv to force-unlock key as a browser would: with Origin and
// Sec-Fetch-Site when given, and the token, if any.
func post(t *testing.T, srv *httptest.Server, key, origin, site string, token ...string) (int, string) {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"key": key})
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/unlock", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if site != "" {
		req.Header.Set("Sec-Fetch-Site", site)
	}
	if len(token) > 0 && token[0] != "" {
		req.Header.Set(tokenHeader, token[0])
	}
	r, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	body, _ := io.ReadAll(r.Body)
	return r.StatusCode, string(body)
}

// setHistoryLimit sets how many events the history endpoint answers, and
// returns what puts it back.
func setHistoryLimit(n int) func() {
	old := historyLimit
	historyLimit = n
	return func() { historyLimit = old }
}
