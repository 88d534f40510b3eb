package pgactivity

import "github.com/qtop-dev/qtop/api"

// Row is the session as the live view's statement row: the one
// conversion that the collector's sampler and qtop --postgres both use,
// so that a session shows the same columns (database, lock wait, xmin
// age, …) whichever of them sampled it.
func (b *Backend) Row() api.StatementRow {
	r := api.StatementRow{
		PID: b.PID, Tenant: b.Tenant, Route: b.Route, Application: b.Application, State: b.State,
		WaitEventType: b.WaitEventType, WaitEvent: b.WaitEvent, Duration: b.Duration, Query: b.Query,
		BlockedBy: b.BlockedBy, User: b.User, Database: b.Database, Client: b.Client,
		QueryStart: b.QueryStart, XactStart: b.XactStart, BackendStart: b.BackendStart, LockWait: b.LockWait,
	}
	if b.XminAge >= 0 {
		r.XminAge = max(b.XminAge, 1)
	}
	return r
}
