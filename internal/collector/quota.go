package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/quota/redisquota"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// DefaultQuotaSync is how often a collector exchanges its quota sums with
// the others through Redis (Config.QuotaRedis).
const DefaultQuotaSync = time.Second

// fleetQuota is the collector's part of fleet-wide quotas: it sums the
// quota usage of every report (quota.Fleet) and adds the verdicts for the
// reporting process to its reply. With Config.QuotaRedis it also exchanges
// its sums with the other collectors once per Config.QuotaSync. It is the
// feature of the reports' quota section; its lock guards the sums and
// the compiled limits.
type fleetQuota struct {
	pol *policyPart
	log *slog.Logger
	now func() time.Time

	mu      sync.Mutex
	fleet   *quota.Fleet
	version uint64 // of the policy the limits were compiled from
	scratch []quota.Verdict
	sync    *redisquota.Sync
	client  *redis.Client
	id      string     // this collector's id in Redis (Config.Writer, or random)
	auth    EngineAuth // for hints in errors
	every   time.Duration

	syncs, syncErrors, verdicts prometheus.Counter
}

var _ feature = (*fleetQuota)(nil)

func (q *fleetQuota) merge(*report.Report, time.Time, bool) {}
func (q *fleetQuota) snapshot(*api.Snapshot, time.Time)     {}
func (q *fleetQuota) tick(context.Context, time.Time)       {}

func newFleetQuota(cfg Config, pol *policyPart) (*fleetQuota, error) {
	f, err := quota.NewFleet(func(string, tenant.Tier) (quota.Limit, bool) { return quota.Limit{}, false })
	if err != nil {
		return nil, err
	}
	q := &fleetQuota{pol: pol, log: cfg.Logger, now: cfg.Now, fleet: f, version: ^uint64(0), every: cfg.QuotaSync}
	if q.every <= 0 {
		q.every = DefaultQuotaSync
	}
	q.syncs = prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_collector_quota_syncs_total",
		Help: "Attempts to exchange quota sums with the other collectors through Redis, failed ones included (qtop_collector_quota_sync_errors_total counts those)."})
	q.syncErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_collector_quota_sync_errors_total",
		Help: "Failed exchanges of quota sums (the collector kept the others' last sums until they expired)."})
	q.verdicts = prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_collector_quota_verdicts_total",
		Help: "Quota verdicts sent in report replies."})
	for _, c := range []prometheus.Collector{q.syncs, q.syncErrors, q.verdicts} {
		if err := cfg.Registerer.Register(c); err != nil {
			return nil, fmt.Errorf("collector: metrics: %w", err)
		}
	}
	if cfg.QuotaRedis != "" {
		id := cfg.Writer
		if id == "" {
			id = randomToken()[:12]
		}
		q.id = id
		auth, err := RedisAuthFromEnv()
		if err != nil {
			return nil, err
		}
		if q.client, err = NewRedisClient(cfg.QuotaRedis, auth); err != nil {
			return nil, err
		}
		q.auth = auth
		q.log.Info("fleet quotas summed through Redis", "redis", redisDescribe(q.client.Options()), "auth", auth)
		// A collector's sums count for three syncs, and at least 2 s, so
		// that a sync late on a busy machine does not drop its processes
		// from the others' sums.
		if q.sync, err = redisquota.New(q.client, id, max(3*q.every, 2*time.Second)); err != nil {
			return nil, fmt.Errorf("%w: quota redis: %w", ErrConfig, err)
		}
		if cfg.QuotaPrefix != "" {
			q.sync = q.sync.WithPrefix(cfg.QuotaPrefix)
		}
		if cfg.QuotaClock != nil {
			q.sync = q.sync.WithClock(cfg.QuotaClock)
		}
	}
	return q, nil
}

// limitsLocked recompiles the limits when the policy changed.
func (q *fleetQuota) limitsLocked(now time.Time) {
	var lim func(string, tenant.Tier) (policy.QuotaLimit, bool)
	q.pol.read(func(p *policy.Policy) {
		if p.Version != q.version {
			q.version = p.Version
			lim = p.Quotas(now)
		}
	})
	if lim == nil {
		return
	}
	q.fleet.SetLimits(func(t string, tier tenant.Tier) (quota.Limit, bool) {
		l, ok := lim(t, tier)
		return quota.Limit{RUPerSecond: l.RUPerSecond, Shadow: l.Shadow}, ok
	})
}

// reply is the hook where a report was merged (or was a duplicate,
// merged false): it takes the report's quota usage and returns reply
// with the verdicts for its process added. It is the one place that
// reads the report's quota section.
func (q *fleetQuota) reply(rep *report.Report, now time.Time, reply report.Reply, merged bool) report.Reply {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.limitsLocked(now)
	src := sourceKey(rep.Source)
	if merged {
		usage, _ := report.SectionOf[quota.Usages](rep)
		q.fleet.Observe(now, src, rep.End.Sub(rep.Start), usage)
	}
	q.scratch = q.fleet.Verdicts(now, src, q.scratch[:0])
	if len(q.scratch) == 0 {
		return reply
	}
	b, err := quota.MarshalVerdicts(q.scratch)
	if err != nil {
		q.log.Error("quota verdicts cannot be encoded in the reply; sending none", "err", err)
		return reply
	}
	q.verdicts.Add(float64(len(q.scratch)))
	reply.Quotas = b
	return reply
}

// closeClient closes the Redis client, which the autopilot's lock shares:
// at Shutdown, once the autopilot has let the lock go (flushActions).
func (q *fleetQuota) closeClient() {
	if q.client != nil {
		q.client.Close()
	}
}

// start exchanges this collector's quota sums with the others' every
// QuotaSync, on a goroutine of wg, until ctx ends; without QuotaRedis it
// does nothing.
func (q *fleetQuota) start(ctx context.Context, wg *sync.WaitGroup) {
	if q.sync == nil {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(q.every)
		defer t.Stop()
		var lastErr string
		for {
			select {
			case <-ctx.Done():
				// Out of the others' sums now rather than after the TTL.
				lctx, cancel := context.WithTimeout(context.Background(), time.Second)
				if err := q.sync.Leave(lctx); err != nil {
					q.log.Warn("quota sums not removed from Redis; they expire with their TTL", "err", err)
				}
				cancel()
				return
			case <-t.C:
			}
			q.mu.Lock()
			local := map[string]quota.Rates{}
			q.fleet.Local(q.now(), func(name string, r quota.Rates) { local[name] = r })
			q.mu.Unlock()
			cctx, cancel := context.WithTimeout(ctx, max(q.every, 500*time.Millisecond))
			remote, err := q.sync.Exchange(cctx, local)
			cancel()
			if err != nil && ctx.Err() != nil {
				continue // stopping (Leave next): an exchange cut short is no failure of Redis
			}
			q.syncs.Inc()
			if err != nil {
				q.syncErrors.Inc()
				// Once per kind of failure, not once a second: a wrong
				// password or a Redis away lasts.
				if msg := err.Error(); msg != lastErr {
					lastErr = msg
					if errors.Is(err, redisquota.ErrDuplicateID) {
						q.log.Error("quota sums not exchanged: another collector uses this --writer; each limits its processes as if alone until one changes it (logged again when the error changes)", "err", err)
					} else {
						q.log.Warn("quota sums not exchanged; using the last ones until Redis answers (logged again when the error changes)", "err", q.auth.engineHint(err, q.client.Options().TLSConfig != nil))
					}
				}
				continue
			}
			if lastErr != "" {
				lastErr = ""
				q.log.Info("quota sums exchanged through Redis again")
			}
			q.mu.Lock()
			q.fleet.SetRemote(q.now(), remote)
			q.mu.Unlock()
		}
	}()
}
