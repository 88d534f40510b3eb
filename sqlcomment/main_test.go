package sqlcomment

import (
	"testing"

	"go.uber.org/goleak"
)

// The wrapper starts no goroutines, but database/sql and pgx do: every
// test must close what it opens.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
