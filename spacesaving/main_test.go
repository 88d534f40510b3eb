package spacesaving

import (
	"testing"

	"go.uber.org/goleak"
)

// The package starts no goroutines; its concurrency tests do, and must
// not leave any behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
