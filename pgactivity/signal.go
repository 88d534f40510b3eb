package pgactivity

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
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
