package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/qtop-dev/qtop/pgactivity"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/sqlcomment/pgxcomment"
	"github.com/qtop-dev/qtop/tenant"
)

// cancelRounds is how many times each cancel path is tried.
const cancelRounds = 20

// runCancel checks, through the bouncer, that a statement cancelled by a
// runaway rule of the wrapper (its context deadline: pgx sends a
// CancelRequest, which PgBouncer forwards to the server connection the
// client holds) is the one cancelled, while a bystander's statement on
// the other server connection runs on; and that the collector's way,
// pgactivity.CancelStatement by pid and query_start on the server, does
// the same.
func runCancel(ctx context.Context, o options) error {
	cfg, err := bouncerConfig(o)
	if err != nil {
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	direct, err := pgxpool.New(ctx, o.direct)
	if err != nil {
		return err
	}
	defer direct.Close()
	b := sqlcomment.NewBudgets()
	if err := b.Set(nil, []policy.Runaway{{ID: "long", Match: []map[string]string{{"tenant": "victim"}},
		AfterSeconds: 0.3, Action: policy.Cancel, Reason: "bench"}}); err != nil {
		return err
	}
	mode, err := sqlcomment.ParseMode(o.mode)
	if err != nil {
		return err
	}
	db := pgxcomment.Wrap(pool, sqlcomment.WithApplication(o.service), sqlcomment.WithMode(mode), sqlcomment.WithBudgets(b))
	fmt.Printf("cancel through the bouncer: mode=%s exec=%s, %d rounds each\n", o.mode, o.execMode, cancelRounds)
	for _, path := range []string{"runaway rule (context deadline)", "pgactivity.CancelStatement"} {
		var ok, wrong int
		var slowest time.Duration
		for range cancelRounds {
			d, err := cancelRound(ctx, db, direct, path != "runaway rule (context deadline)")
			if err != nil {
				wrong++
				fmt.Printf("  %s: %v\n", path, err)
				continue
			}
			ok++
			slowest = max(slowest, d)
		}
		fmt.Printf("%s: %d/%d right (victim cancelled, bystander finished), slowest victim %s\n",
			path, ok, ok+wrong, slowest.Round(time.Millisecond))
	}
	return nil
}

// cancelRound runs a victim (2 s) and a bystander (1 s) statement at once
// and cancels the victim; it returns how long the victim took.
func cancelRound(ctx context.Context, db *pgxcomment.DB, direct *pgxpool.Pool, bySampler bool) (time.Duration, error) {
	var wg sync.WaitGroup
	var byErr error
	wg.Go(func() {
		bctx := tenant.With(ctx, tenant.Tags{Tenant: "bystander"})
		_, byErr = db.Exec(bctx, "SELECT 'truth:bystander', pg_sleep($1::float8)", 1.0)
	})
	vctx := tenant.With(ctx, tenant.Tags{Tenant: "slowpoke"})
	if !bySampler {
		vctx = tenant.With(ctx, tenant.Tags{Tenant: "victim"}) // the runaway rule's
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := db.Exec(vctx, "SELECT 'truth:victim', pg_sleep($1::float8)", 2.0)
		done <- err
	}()
	if bySampler {
		if err := cancelBySampler(ctx, direct); err != nil {
			<-done
			wg.Wait()
			return 0, err
		}
	}
	vErr := <-done
	took := time.Since(start)
	wg.Wait()
	var pe *pgconn.PgError
	switch {
	case byErr != nil:
		return took, fmt.Errorf("the bystander failed: %v", byErr)
	case !bySampler && !errors.Is(vErr, sqlcomment.ErrRunaway):
		return took, fmt.Errorf("the victim was not cancelled by the rule: %v", vErr)
	case bySampler && !(errors.As(vErr, &pe) && pe.Code == "57014"):
		return took, fmt.Errorf("the victim was not cancelled: %v", vErr)
	}
	return took, nil
}

// cancelBySampler finds the victim's statement with the sampler, as the
// collector does, and cancels exactly it.
func cancelBySampler(ctx context.Context, direct *pgxpool.Pool) error {
	s := pgactivity.NewSampler(direct)
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		snap, err := s.Sample(ctx)
		if err != nil {
			return err
		}
		for i := range snap.Backends {
			b := &snap.Backends[i]
			if t, ok := truth(b.Query); ok && t == "victim" && b.Active() && b.Duration > 200*time.Millisecond {
				return pgactivity.CancelStatement(ctx, direct, pgactivity.TargetOf(b), "bench")
			}
		}
	}
	return errors.New("the sampler never saw the victim")
}
