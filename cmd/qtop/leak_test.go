package main

import (
	"testing"

	"go.uber.org/goleak"
)

// Every source qtop opens is closed before run returns: no goroutine of
// the collector client, the demo collector or the pgx pool outlives it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
