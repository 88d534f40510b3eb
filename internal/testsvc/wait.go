package testsvc

import (
	"testing"
	"time"
)

// pollEvery is how often Eventually checks its condition.
const pollEvery = 5 * time.Millisecond

// Eventually checks cond until it holds and fails t (Fatal) when it still
// does not after timeout, saying what was awaited. It is how a test waits
// for a real server, a process or a background goroutine: on a condition,
// with a deadline, never for a fixed time. timeout is a bound for a
// stalled machine, not a figure: give it generously (seconds).
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(timeout, cond) {
		t.Fatalf("%s: not after %v", what, timeout)
	}
}

// Poll checks cond until it holds or timeout passes, and reports whether
// it held: Eventually for callers that do not fail at once (a helper
// process, a loop that fails with its own message).
func Poll(timeout time.Duration, cond func() bool) bool {
	return PollEvery(timeout, pollEvery, cond)
}

// PollEvery is Poll checking every interval: for a condition that costs
// a server some work (a query to Prometheus) or that the caller drives
// (sending traffic before each check).
func PollEvery(timeout, every time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}
