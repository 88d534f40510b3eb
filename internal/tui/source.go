package tui

import (
	"context"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/pgactivity"

	"github.com/qtop-dev/qtop/policy"
)

// Query is what the UI asks of a source: the measure that orders the
// tenants (live.MeasureRU …) and how many come before the "other" row.
type Query struct {
	Measure string
	Top     int
	// GroupBy is live.GroupTenant (the default, "") or another of
	// live.Groups; only qtop --postgres groups by anything but tenant.
	GroupBy string
}

// DefaultTop is how many tenants a source sends before "other" unless
// told otherwise.
const DefaultTop = 100

// Features tells which actions a source supports.
type Features struct {
	// Throttle: the source can add a policy rule (a collector, the demo).
	Throttle bool
	// Signal: the source can cancel or terminate a PostgreSQL backend.
	Signal bool
	// Group: the source groups load by other session fields than the
	// tenant (Query.GroupBy).
	Group bool
}

// Source hands the UI its snapshots and carries out its actions. The UI
// calls every method inside a tea.Cmd, one Next at a time.
//
// Lifecycle: Next blocks until the next snapshot (about one a second; the
// first one comes at once when the source has it) or until ctx ends. An
// error from Next is not final: the UI shows it and calls Next again
// later, and the source reconnects. Close releases everything; calls after
// Close return ErrClosed.
type Source interface {
	Next(ctx context.Context, q Query) (api.Snapshot, error)
	// Throttle posts rule (policy.Throttle) to the collector.
	Throttle(ctx context.Context, rule policy.Rule) error
	// Cancel and Terminate signal a PostgreSQL backend.
	Cancel(ctx context.Context, pid int32) error
	Terminate(ctx context.Context, pid int32) error
	Features() Features
	// Describe names the source for the title bar, e.g.
	// "collector http://127.0.0.1:7070".
	Describe() string
	Close() error
}

// liveFeatures is implemented by sources whose features depend on what
// they report: a collector can cancel and terminate only while it samples
// a PostgreSQL. The UI asks again with every snapshot.
type liveFeatures interface {
	FeaturesOf(s *api.Snapshot) Features
}

// SafeSignaler is implemented by the sources whose c and k act only on
// what was shown: the statement (pid and query_start) for a cancel, the
// session (backend_start) and its transaction (xact_start) for a
// terminate, checked and signalled in one server-side statement. The UI
// signals only through it; actor names who asked, for the server's log.
type SafeSignaler interface {
	CancelStatement(ctx context.Context, t pgactivity.Target, actor string) error
	TerminateSession(ctx context.Context, t pgactivity.Target, actor string) error
}

// Historian is implemented by sources with a store behind them (a
// collector): the drill-in's history beyond the live 120 s.
type Historian interface {
	// History returns tenant's per-minute load over the last minutes.
	History(ctx context.Context, tenant string, minutes int) (api.History, error)
}

// OnceSource is a Source that can wait for its first complete snapshot,
// for `qtop --once` (a collector that has just started, a sampler's first
// interval, the demo fleet's first reports). Other sources answer --once
// with Next.
type OnceSource interface {
	Once(ctx context.Context, q Query) (api.Snapshot, error)
}
