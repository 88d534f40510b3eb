package pgactivity

import (
	"testing"

	"go.uber.org/goleak"
)

// Run starts no goroutine of its own, but the tests run sessions in
// goroutines and open pools: none may outlive its test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
