package tui

import (
	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/incident/incidenttest"
)

// incidentAt is second i of the scripted incident (incidenttest.At).
func incidentAt(i int) api.Snapshot { return incidenttest.At(t0, i) }
