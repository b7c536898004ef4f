package wait

import "testing"

type cfg struct{}

type testWaiter = Waiter[cfg, *int]

// woken reports whether wt has a wake-up pending, and consumes it.
func woken(wt *testWaiter) bool {
	select {
	case <-wt.Wake:
		return true
	default:
		return false
	}
}

// TestGrantToNonHead: a ticket drawn concurrently with an older one of the
// same Locker may be granted first (the older insert had not committed when
// the release read the queue). The waiter holding it is not the local head,
// yet it must hear of the grant and read it: the head, finding the key held,
// would otherwise wait for the granted lease to run out.
func TestGrantToNonHead(t *testing.T) {
	w := New[cfg, *int](func(key string) string { return "tag-" + key }, nil)
	const key = "k"
	older := w.JoinOrdered(key, cfg{}, 10, "older")
	younger := w.JoinOrdered(key, cfg{}, 12, "younger")
	woken(older)
	woken(younger)

	// An event naming the younger ticket.
	w.GrantEvent("tag-"+key, 12)
	if !woken(younger) || !w.MayAsk(key, younger) || !w.BeginTry(key, younger) {
		t.Fatal("the waiter granted the key was not let read the grant")
	}
	w.EndTry(younger)
	if w.MayAsk(key, younger) {
		t.Fatal("the grant's news outlived the read")
	}
	if !woken(older) {
		t.Fatal("the head, whose older ticket the grant passed, was not woken")
	}

	// A grant by a release of this Locker whose waiter could not be handed
	// the lock: told, then woken with the head after the release.
	if !w.Told(key, 12) {
		t.Fatal("told found nothing to wake for")
	}
	w.WakeHead(key)
	if !woken(younger) || !w.BeginTry(key, younger) {
		t.Fatal("the told waiter was not woken to read its grant")
	}
	w.EndTry(younger)

	// Handed over in-process: the waiter is found wherever it stands.
	if got := w.ReserveTicket(key, 12); got != younger {
		t.Fatalf("reserveTicket found %v, want the younger waiter", got)
	}
	w.Finish(younger, nil, false, "")
	<-younger.Grant

	// A grant to a ticket elsewhere, between ours: the head (older) hears
	// that it was passed over, the younger waiter sleeps on.
	w.GrantEvent("tag-"+key, 11)
	if !woken(older) || woken(younger) {
		t.Fatal("a grant to ticket 11 elsewhere: wrong waiters woken")
	}
	// One older than every ticket of ours: no news here.
	if w.Told(key, 9) {
		t.Fatal("a grant to an older ticket elsewhere was news here")
	}
	w.GrantEvent("tag-"+key, 9)
	if woken(older) || woken(younger) {
		t.Fatal("a grant to an older ticket elsewhere woke our waiters")
	}
}

// TestGrantBeforeJoin: the news of a grant may come before its waiter joins
// the local queue (its ticket insert has returned, its join not yet), by an
// event or by a release of this Locker; the waiter, joining behind an older
// one, must still read its grant.
func TestGrantBeforeJoin(t *testing.T) {
	for _, by := range []string{"event, no queue yet", "event", "release here"} {
		t.Run(by, func(t *testing.T) {
			w := New[cfg, *int](func(key string) string { return "tag-" + key }, nil)
			const key = "k"
			var older *testWaiter
			if by != "event, no queue yet" {
				older = w.JoinOrdered(key, cfg{}, 10, "older")
				woken(older)
			}
			switch by {
			case "release here":
				w.Told(key, 12)
			default:
				w.GrantEvent("tag-"+key, 12)
			}
			if older == nil {
				older = w.JoinOrdered(key, cfg{}, 10, "older")
				woken(older)
			}
			younger := w.JoinOrdered(key, cfg{}, 12, "younger")
			if !woken(younger) || !w.MayAsk(key, younger) || !w.BeginTry(key, younger) {
				t.Fatal("a waiter granted the key before it queued was not let read the grant")
			}
			w.EndTry(younger)
			other := w.JoinOrdered(key, cfg{}, 14, "other")
			if woken(other) || w.MayAsk(key, other) {
				t.Fatal("a grant's news reached another waiter")
			}
		})
	}
}

// TestLeaveAsleep: a waiter that leaves while its Locker holds the key
// makes the next waiter head without waking it; the key coming free here
// wakes it, once. A key free already (freed before the head was marked,
// or not held at all) wakes the next head at once.
func TestLeaveAsleep(t *testing.T) {
	w := New[cfg, *int](nil, nil)
	const key = "k"
	first := w.Join(key, cfg{})
	second := w.Join(key, cfg{})
	third := w.Join(key, cfg{})
	woken(first)
	held := true
	if !w.Leave(key, first, func() bool { return held }) {
		t.Fatal("Leave did not leave")
	}
	if woken(second) || !w.IsHead(key, second) {
		t.Fatal("the next waiter was woken while the key is held here, or is not head")
	}
	held = false
	w.WakeAsleep(key)
	if !woken(second) {
		t.Fatal("the head that came asleep was not woken when the key came free")
	}
	w.WakeAsleep(key)
	if woken(second) {
		t.Fatal("a second WakeAsleep woke the head again")
	}
	// Freed before the head was marked: held() says so, and it is woken.
	if !w.Leave(key, second, func() bool { return false }) || !woken(third) {
		t.Fatal("the key free already: the next head was not woken")
	}
	fourth := w.Join(key, cfg{})
	if !w.Leave(key, third, func() bool { return held }) || !woken(fourth) {
		t.Fatal("the key not held here: Leave did not wake the next head")
	}
}
