package pgxcomment

import (
	"testing"

	"go.uber.org/goleak"
)

// pgx pools start goroutines: every test must close what it opens.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
