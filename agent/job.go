package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/qtop-dev/qtop/fairqueue"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/ru"
	"github.com/qtop-dev/qtop/tenant"
)

// Job runs fn as one background job of tags' tenant: it is admitted like
// a request (tier shedder, RU bucket; no CoDel, a job waits in its own
// queue), run with the tags in its context (so its SQL is commented and
// timed for the tenant), charged its real cost as a write of its
// duration, and recorded once as a job. A refused job is not run: Job
// returns the decision's error (enforce.ErrThrottled or enforce.ErrShed,
// with the retry delay in its text); otherwise fn's error.
func (a *Agent) Job(ctx context.Context, tags tenant.Tags, fn func(ctx context.Context) error) error {
	if err := tags.Validate(); err != nil {
		return fmt.Errorf("agent: job tenant: %w", err)
	}
	start := time.Now()
	d := a.enf.AdmitAt(start, tags)
	tags.Tier = d.Tier
	if !d.Admitted() {
		a.rec.Record(meter.Record{Time: start, Tags: tags, Kind: report.KindJob})
		return d.Err()
	}
	q := &request{}
	q.Context.Context, q.Tags = ctx, tags
	err := fn(q)
	end := time.Now()
	dur := end.Sub(start)
	cost := a.enf.CostAt(end, tags, ru.OpWrite, 0, dur)
	a.rec.Record(meter.Record{Time: end, Tags: tags, Kind: report.KindJob, Duration: dur, Err: err != nil, RU: cost})
	return err
}

// Workers runs queued items of many tenants on a fixed number of
// goroutines, fairly: items wait in a fairqueue.Queue weighted by each
// tenant's plan (Plan.Weight) and capped by its Plan.Concurrency, and
// each runs as a Job of its tenant. Make one with NewWorkers; Submit
// queues; Shutdown stops taking items and waits for those queued.
type Workers[T any] struct {
	a      *Agent
	q      *fairqueue.Queue[item[T]]
	fn     func(ctx context.Context, v T) error
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

type item[T any] struct {
	tags tenant.Tags
	ctx  context.Context
	v    T
}

// NewWorkers starts n workers that run fn for each submitted item. A
// failed item (fn's error, or refused by the enforcer) is logged at warn
// level and not retried. opts tune the queue (fairqueue.WithMaxPending,
// WithQuantum; the weights and caps come from the plans).
func NewWorkers[T any](a *Agent, n int, fn func(ctx context.Context, v T) error, opts ...fairqueue.Option) (*Workers[T], error) {
	if a == nil || fn == nil || n < 1 {
		return nil, fmt.Errorf("%w: workers need an agent, a function and n ≥ 1 (n = %d)", ErrConfig, n)
	}
	e := a.enf
	opts = append([]fairqueue.Option{
		fairqueue.WithWeights(func(t string) int { return e.PlanOf(t).Weight }),
		fairqueue.WithConcurrency(func(t string) int { return e.PlanOf(t).Concurrency }),
	}, opts...)
	q, err := fairqueue.New[item[T]](opts...)
	if err != nil {
		return nil, fmt.Errorf("agent: workers: %w", err)
	}
	w := &Workers[T]{a: a, q: q, fn: fn}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	w.wg.Add(n)
	for range n {
		go w.run()
	}
	return w, nil
}

// Submit queues v for tags' tenant; it waits while the tenant has its
// maximum of items queued (backpressure), until ctx ends. The item runs
// under a context that keeps ctx's values but not its cancellation.
func (w *Workers[T]) Submit(ctx context.Context, tags tenant.Tags, v T) error {
	if err := tags.Validate(); err != nil {
		return fmt.Errorf("agent: job tenant: %w", err)
	}
	err := w.q.PushAt(ctx, time.Now(), tags.Tenant, item[T]{tags: tags, ctx: context.WithoutCancel(ctx), v: v}, 1)
	if errors.Is(err, fairqueue.ErrClosed) {
		return ErrClosed
	}
	return err
}

func (w *Workers[T]) run() {
	defer w.wg.Done()
	for {
		it, err := w.q.PopWait(w.ctx)
		if err != nil {
			return
		}
		v := it.Value
		if err := w.a.Job(v.ctx, v.tags, func(ctx context.Context) error { return w.fn(ctx, v.v) }); err != nil {
			w.a.cfg.logger.Warn("agent: job failed", "tenant", v.tags.Tenant, "err", err)
		}
		w.q.Done(it.Tenant)
	}
}

// Shutdown stops new submissions and waits until the queued items have
// run, or until ctx ends (then the workers stop after their current
// item, leaving the rest).
func (w *Workers[T]) Shutdown(ctx context.Context) error {
	w.q.Close()
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	select {
	case <-done:
		w.cancel()
		return nil
	case <-ctx.Done():
		w.cancel()
		<-done
		return fmt.Errorf("agent: workers shutdown: %w", ctx.Err())
	}
}
