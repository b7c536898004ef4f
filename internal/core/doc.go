// Package core is dblock's engine: the machinery behind a Locker. It takes
// keys (try.go), waits for them in one wait loop that plain and FIFO waits
// share (waitloop.go), hands a released key to a local waiter (handoff.go)
// or grants it to a FIFO ticket (fifo_grant.go), and releases (release.go).
//
// Each mechanism it uses lives in a package of its own that owns its state
// and goroutine, and reports back through a small interface the engine
// implements: internal/lease (held leases and the heartbeat; leaseHooks),
// internal/wait (local queues, the idle poller; idleHost), internal/fifo
// (tickets), internal/notify and internal/bells (release events; onEvent),
// internal/fair (contention marks), internal/clock (the fine timer). The
// engine starts them in New and stops them in Close.
//
// The root package is a facade: its Locker holds one Engine, and its Lock
// is a struct whose only field is this package's Lock, handed out in
// place, so an acquisition stays one allocation. Nothing here imports the root; no mechanism imports core.
package core
