package pgactivity

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Cancel cancels the statement running in backend pid
// (pg_cancel_backend); the session stays connected. It returns an error
// wrapping ErrNoBackend when pid is not a backend, and one wrapping
// ErrInsufficientPrivilege when the pool's role may not signal it.
func Cancel(ctx context.Context, pool *pgxpool.Pool, pid int32) error {
	return signal(ctx, pool, "cancel", `SELECT pg_cancel_backend($1)`, pid)
}

// Terminate ends the session of backend pid (pg_terminate_backend),
// rolling back its transaction. Errors are as for Cancel. It returns once
// the signal is sent; the backend exits shortly after.
func Terminate(ctx context.Context, pool *pgxpool.Pool, pid int32) error {
	return signal(ctx, pool, "terminate", `SELECT pg_terminate_backend($1)`, pid)
}

func signal(ctx context.Context, pool *pgxpool.Pool, what, sql string, pid int32) error {
	if pid <= 0 {
		return fmt.Errorf("%w: %d", ErrBadPID, pid)
	}
	var ok bool
	if err := pool.QueryRow(ctx, sql, pid).Scan(&ok); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42501" { // insufficient_privilege
			return fmt.Errorf("%w: %s backend %d: %s (%s); grant the role pg_signal_backend to signal other roles' sessions: GRANT pg_signal_backend TO …",
				ErrInsufficientPrivilege, what, pid, pe.Message, pe.Detail)
		}
		return fmt.Errorf("pgactivity: %s backend %d: %w", what, pid, err)
	}
	if !ok {
		return fmt.Errorf("%w: %s: pid %d is not a PostgreSQL backend", ErrNoBackend, what, pid)
	}
	return nil
}

// ErrMovedOn: CancelStatement or TerminateSession found the backend
// running something else than the statement, transaction or session it
// was given, and did nothing.
var ErrMovedOn = errors.New("pgactivity: the backend moved on")

// MaxActor bounds the length of the actor named in a signal's comment.
const MaxActor = 64

// Target names what a cancel or a terminate may act on, as a sample saw
// it: the pid, and the start times that tell this statement, transaction
// and session from the next ones of the same pid.
type Target struct {
	PID int32
	// QueryStart identifies the statement to cancel (required by
	// CancelStatement).
	QueryStart time.Time
	// BackendStart identifies the session to terminate (required by
	// TerminateSession); XactStart, when set, also the transaction (a
	// session idle in the transaction that holds the lock).
	BackendStart, XactStart time.Time
}

// TargetOf returns the target of backend b.
func TargetOf(b *Backend) Target {
	return Target{PID: b.PID, QueryStart: b.QueryStart, BackendStart: b.BackendStart, XactStart: b.XactStart}
}

// cancelIfSQL cancels the backend only if it still runs the statement
// that started at $2: one statement, so that the check and the signal see
// the same pg_stat_activity row. (PostgreSQL cannot make a signal
// conditional on the backend's state; what is left between the server's
// check and its signal is the time of one function call, not the second
// or so between a prompt and its answer.)
const cancelIfSQL = `SELECT a.query_start, coalesce(a.state, ''), coalesce(a.query, ''),
	CASE WHEN a.query_start = $2 AND a.state IN ('active', 'fastpath function call') THEN pg_cancel_backend(a.pid) END
FROM pg_stat_activity a WHERE a.pid = $1`

// terminateIfSQL ends the session only if it is the one that connected at
// $2 and, when $3 is not null, still in the transaction that began at $3.
const terminateIfSQL = `SELECT a.query_start, coalesce(a.state, ''), coalesce(a.query, ''),
	CASE WHEN a.backend_start = $2 AND ($3::timestamptz IS NULL OR a.xact_start = $3) THEN pg_terminate_backend(a.pid) END
FROM pg_stat_activity a WHERE a.pid = $1`

// CancelStatement cancels the statement of t.PID only if the backend
// still runs the statement that started at t.QueryStart, in one
// server-side statement; otherwise it does nothing and returns an error
// wrapping ErrMovedOn that says what the backend runs now. actor (who
// asked, e.g. "qtop alice") goes into the statement's comment, so that
// the server's log (log_statement) and pg_stat_activity show who
// signalled. A role that cannot see the backend's session (another
// role's, without pg_monitor) cannot check it: the error then wraps
// ErrInsufficientPrivilege. Other errors are as for Cancel.
func CancelStatement(ctx context.Context, pool *pgxpool.Pool, t Target, actor string) error {
	if t.QueryStart.IsZero() {
		return fmt.Errorf("%w: cancel backend %d: the statement's query_start is unknown", ErrBadPID, t.PID)
	}
	return signalIf(ctx, pool, "cancel", cancelIfSQL, t, actor, t.QueryStart, nil)
}

// TerminateSession ends the session of t.PID only if it is the session
// that connected at t.BackendStart and, when t.XactStart is set, is still
// in that transaction; otherwise it returns an error wrapping ErrMovedOn.
// Errors and actor are as for CancelStatement.
func TerminateSession(ctx context.Context, pool *pgxpool.Pool, t Target, actor string) error {
	if t.BackendStart.IsZero() {
		return fmt.Errorf("%w: terminate backend %d: the session's backend_start is unknown", ErrBadPID, t.PID)
	}
	var xact any
	if !t.XactStart.IsZero() {
		xact = t.XactStart
	}
	return signalIf(ctx, pool, "terminate", terminateIfSQL, t, actor, t.BackendStart, xact)
}

func signalIf(ctx context.Context, pool *pgxpool.Pool, what, sql string, t Target, actor string, start time.Time, xact any) error {
	if t.PID <= 0 {
		return fmt.Errorf("%w: %d", ErrBadPID, t.PID)
	}
	var (
		queryStart pgtype.Timestamptz
		state, q   string
		sent       pgtype.Bool
	)
	args := []any{t.PID, start}
	if what == "terminate" {
		args = append(args, xact)
	}
	err := pool.QueryRow(ctx, "/* qtop "+what+" by "+commentSafe(actor)+" */ "+sql, args...).Scan(&queryStart, &state, &q, &sent)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: %s: backend %d has ended", ErrNoBackend, what, t.PID)
	case err != nil:
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42501" {
			return fmt.Errorf("%w: %s backend %d: %s (%s); grant the role pg_signal_backend to signal other roles' sessions: GRANT pg_signal_backend TO …",
				ErrInsufficientPrivilege, what, t.PID, pe.Message, pe.Detail)
		}
		return fmt.Errorf("pgactivity: %s backend %d: %w", what, t.PID, err)
	case !sent.Valid && state == "" && q == HiddenQuery:
		// PostgreSQL hides another role's session from a role without
		// pg_read_all_stats: its start times read as null, so the check
		// can never pass. The backend has not moved on; say what is missing.
		return fmt.Errorf("%w: %s backend %d: the session belongs to another role and is hidden from this one, so it cannot be checked to still run what was shown; "+
			"grant the role pg_monitor (GRANT pg_monitor TO …) as well as pg_signal_backend", ErrInsufficientPrivilege, what, t.PID)
	case !sent.Valid:
		now := "is " + state
		if state == StateActive && queryStart.Valid && !queryStart.Time.Equal(t.QueryStart) {
			now = "runs another statement (started " + queryStart.Time.Format("15:04:05.000") + ")"
		} else if what == "terminate" {
			now = "is another session or transaction now"
		}
		return fmt.Errorf("%w: %s: backend %d %s; nothing done", ErrMovedOn, what, t.PID, now)
	case !sent.Bool:
		return fmt.Errorf("%w: %s: the signal to backend %d could not be sent", ErrNoBackend, what, t.PID)
	}
	return nil
}

// commentSafe makes s safe inside a /* */ comment: at most MaxActor
// bytes of letters, digits and " ._@-()".
func commentSafe(s string) string {
	b := make([]byte, 0, min(len(s), MaxActor))
	for i := 0; i < len(s) && len(b) < MaxActor; i++ {
		c := s[i]
		if ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || strings.IndexByte(" ._@-()", c) >= 0 {
			b = append(b, c)
		} else {
			b = append(b, '_')
		}
	}
	if len(b) == 0 {
		return "qtop"
	}
	return string(b)
}
