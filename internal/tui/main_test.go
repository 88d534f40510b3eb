package tui

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// teatest waits for SIGINT in a goroutine of its own for the life
		// of the process.
		goleak.IgnoreTopFunction("github.com/charmbracelet/x/exp/teatest.NewTestModel.func2"),
		// pgx's pool closes idle connections in the background.
		goleak.IgnoreAnyFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
	)
}

// viewOf returns m's view of type V.
func viewOf[V view](m *Model) V {
	for _, v := range m.nav.views {
		if x, ok := v.(V); ok {
			return x
		}
	}
	panic("no such view")
}
