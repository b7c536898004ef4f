// Package ui serves a live web page of a lock table: the locks held,
// grouped by what they are (locks, leaders of elections, semaphore
// permits, shared locks), the calls waiting under what they wait for with
// who blocks them, chains and cycles of waits, and, where the table keeps
// its history (dblock.WithHistory), a timeline of each key.
//
// Handler returns an http.Handler; the dblock command serves it as
// "dblock ui". Mount it in an admin server of your own behind your own
// authentication:
//
//	page, err := ui.Handler(locker, ui.AllowUnlock())
//	if err != nil {
//		return err
//	}
//	mux.Handle("/locks/", http.StripPrefix("/locks", auth(page)))
//
// The page loads its script and style from the handler itself (nothing
// from elsewhere, no inline script: a Content-Security-Policy of
// default-src 'self' is sent and holds), renders every key, owner and
// value as text, and receives the table's state as server-sent events,
// read at most every Interval while a page is open. GET requests change
// nothing. Force-unlock is off unless AllowUnlock is given; it takes a POST
// from the page itself (a same-origin check and a token the page carries)
// and is recorded in the history as who did it (dblock.Locker.ForceUnlockBy).
package ui
