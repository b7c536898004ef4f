// Package clock runs a Locker's short poll delays on time.
//
// Go's timers fire up to a millisecond late on Linux while the process has
// nothing else to run: the runtime then waits in epoll_wait, whose timeout
// counts whole milliseconds, so a 300 µs timer fires after 1 ms and a
// 1.5 ms one after 2 ms (golang/go#53824; BenchmarkTimer: 1.08 ms for
// 300 µs, against 0.32 ms on the fine clock). Contended keys' pollers ask
// for sub-millisecond paces that time.Timer does not keep: traced on
// MariaDB, a waiter polling every millisecond found the key free 1.09 ms
// (median) after another Locker released it, and the key passed between
// Lockers in 1.5-1.6 ms on average; on the fine clock, 0.63 ms and
// 1.0-1.1 ms. So a Timer's delays under FineBelow run on its Clock's fine
// timer, where the platform has one (a timerfd on Linux, which the
// netpoller reports as soon as it fires, however short the wait);
// elsewhere, and for longer delays, on time.Timer.
//
// A Clock owns one goroutine, started by the first short delay through
// the spawn function its owner gives (so that the owner's Close waits for
// it) and stopped when the owner's context ends.
package clock
