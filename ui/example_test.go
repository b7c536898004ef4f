package ui_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/ui"
)

// ExampleHandler mounts the page under /locks/ of an admin server (here an
// httptest server; put your own authentication in front of it) and reads
// the state the page shows.
func ExampleHandler() {
	// The test PostgreSQL (DBLOCK_POSTGRES_DSN); in your code,
	// sql.Open("pgx", dsn).
	db, err := sql.Open("pgx", dbtest.DSN(dblock.Postgres))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := dblock.Migrate(ctx, db, dblock.WithTable("example_ui_locks")); err != nil {
		log.Fatal(err)
	}
	locker, err := dblock.New(db, dblock.WithTable("example_ui_locks"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	lock, err := locker.TryLock(ctx, "nightly-report", dblock.Owner("cron@node-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Unlock(ctx)

	page, err := ui.Handler(locker, ui.AllowUnlock())
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/locks/", http.StripPrefix("/locks", page)) // behind your own auth
	srv := httptest.NewServer(mux)
	defer srv.Close()

	r, err := http.Get(srv.URL + "/locks/state")
	if err != nil {
		log.Fatal(err)
	}
	defer r.Body.Close()
	var state struct {
		Counts struct{ Locks int }
		Groups []struct {
			Name    string
			Holders []struct{ Owner string }
		}
	}
	if err := json.NewDecoder(r.Body).Decode(&state); err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Status, state.Counts.Locks, "held:", state.Groups[0].Name, "by", state.Groups[0].Holders[0].Owner)
	// Output: 200 OK 1 held: nightly-report by cron@node-1
}
