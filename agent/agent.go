package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/trace"

	"github.com/qtop-dev/qtop/enforce"
	"github.com/qtop-dev/qtop/freshness"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/meter/otelmeter"
	"github.com/qtop-dev/qtop/meter/sqlmeter"
	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/tlsfiles"
)

// Agent instruments one service: it owns the recorder that aggregates
// its work per tenant, the reporter that ships it to the collector, and
// the enforcer that admits and charges it. Make one per process with New,
// wrap the HTTP handler with Handler, open the database through OpenDB
// or OpenPgxPool, run background work with Job or a Workers pool, and
// call Shutdown before exit. Safe for concurrent use.
type Agent struct {
	cfg     config
	rec     *meter.Recorder
	rep     *meter.Reporter
	enf     *enforce.Enforcer
	queue   *enforce.Queue
	metrics *enforce.Metrics
	obs     sqlcomment.Observer
	pool    poolWaits
	tracer  trace.Tracer
	sp      *otelmeter.SpanProcessor
	fresh   *freshness.Shedder
	gate    *quota.Gate // fleet quotas: nil without WithCollector

	mu   sync.Mutex
	shut bool
}

// New returns a started agent. With WithCollector it reports every
// interval; without, it enforces and records locally.
func New(opts ...Option) (*Agent, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg}
	a.pool.max = cfg.maxPoolTenants

	ropts := []meter.RecorderOption{meter.WithSource(report.Source{Service: cfg.service, Instance: cfg.instance})}
	if cfg.reg != nil {
		ropts = append(ropts, meter.WithRegisterer(cfg.reg))
	}
	if a.rec, err = meter.NewRecorder(ropts...); err != nil {
		return nil, fmt.Errorf("agent: recorder: %w", err)
	}
	if cfg.service == "" {
		a.cfg.service = a.rec.Source().Service
	}

	if a.gate, err = newGate(cfg); err != nil {
		return nil, err
	}
	if a.enf, err = enforce.New(cfg.enforceOptions(a.gate)...); err != nil {
		return nil, fmt.Errorf("agent: enforcer: %w", err)
	}
	if cfg.slots > 0 {
		if a.queue, err = a.enf.NewQueue(cfg.slots); err != nil {
			return nil, fmt.Errorf("agent: queue: %w", err)
		}
	}
	if err := a.newFreshness(); err != nil {
		return nil, fmt.Errorf("agent: freshness: %w", err)
	}
	if cfg.reg != nil {
		if a.metrics, err = enforce.NewMetrics(cfg.reg, a.enf, 10, 0); err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
	}
	if a.obs, err = sqlmeter.SQLObserver(a.rec); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if cfg.tp != nil {
		// The middleware records requests and the SQL observer
		// statements: the processor tags spans and records the rest.
		if a.sp, err = otelmeter.NewSpanProcessor(a.rec, otelmeter.WithRequestSpans(false), otelmeter.WithDBSpans(false)); err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		cfg.tp.RegisterSpanProcessor(a.sp)
		a.tracer = cfg.tp.Tracer("github.com/qtop-dev/qtop/agent")
	}
	if cfg.collector != "" {
		if err := a.startReporter(cfg); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// startReporter makes and starts the reporter of an agent with a
// collector.
func (a *Agent) startReporter(cfg config) error {
	popts := []meter.ReporterOption{
		meter.WithInterval(cfg.interval),
		meter.WithLogger(cfg.logger),
		meter.WithPolicyHandler(a.applyPolicy),
		meter.WithCutHook(enforcementCut(a.enf, a.pool.take)),
		meter.WithQuota(a.gate),
		// The names behind session tagging's short ids (pgx.go).
		meter.WithSectionSource(cfg.sqlNames.Section),
	}
	popts = append(popts, a.reportOptions()...)
	if cfg.token != "" {
		popts = append(popts, meter.WithToken(cfg.token))
	}
	popts = append(popts, cfg.reportOpts...) // after WithToken: a token source replaces it
	files := tlsfiles.ClientFromEnv()
	if cfg.tlsFiles != nil {
		files = *cfg.tlsFiles
	}
	popts = append(popts, meter.WithTLSFiles(files))
	if cfg.reg != nil {
		popts = append(popts, meter.WithRegisterer(cfg.reg))
	}
	u := strings.TrimRight(cfg.collector, "/") + ReportsPath
	rep, err := meter.NewReporter(u, a.rec, popts...)
	if errors.Is(err, meter.ErrInvalid) {
		return fmt.Errorf("%w: reporter: %w", ErrConfig, err) // a token file, a queue bound
	} else if err != nil {
		return fmt.Errorf("agent: reporter: %w", err)
	}
	a.rep = rep
	a.rep.Start()
	return nil
}

// newGate makes the quota gate of an agent that reports (nil for one
// that does not): fleet-wide quotas (policy rules of action quota, the
// autopilot's default action) are answered in the reports' replies, and
// the enforcer applies them after the tenant's own bucket.
func newGate(cfg config) (*quota.Gate, error) {
	if cfg.collector == "" {
		return nil, nil
	}
	var opts []quota.GateOption
	if cfg.reg != nil {
		opts = append(opts, quota.WithRegisterer(cfg.reg))
	}
	g, err := quota.NewGate(opts...)
	if err != nil {
		return nil, fmt.Errorf("agent: quota gate: %w", err)
	}
	return g, nil
}

// enforceOptions returns the enforcer's options the agent's say, with
// the quota gate when there is one.
func (cfg *config) enforceOptions(gate *quota.Gate) []enforce.Option {
	eopts := []enforce.Option{enforce.WithLogger(cfg.logger)}
	if gate != nil {
		eopts = append(eopts, enforce.WithQuota(gate))
	}
	if cfg.plans != nil {
		eopts = append(eopts, enforce.WithPlans(cfg.plans))
	}
	if cfg.planOf != nil {
		eopts = append(eopts, enforce.WithPlanOf(cfg.planOf))
	}
	if cfg.model != nil {
		eopts = append(eopts, enforce.WithCostModel(*cfg.model))
	}
	shadow := cfg.shadow
	if cfg.shadowAll {
		shadow = []enforce.Rule{enforce.RuleShed, enforce.RuleQueue, enforce.RuleBucket}
	}
	if len(shadow) > 0 {
		eopts = append(eopts, enforce.WithShadow(shadow...))
	}
	return eopts
}

// ReportsPath is where the collector takes reports.
const ReportsPath = "/v1/reports"

// Recorder returns the agent's recorder (for records of work the agent
// does not see, and for tests).
func (a *Agent) Recorder() *meter.Recorder { return a.rec }

// Enforcer returns the agent's enforcer (plans, overrides, statistics).
func (a *Agent) Enforcer() *enforce.Enforcer { return a.enf }

// Reporter returns the agent's reporter, nil without WithCollector.
func (a *Agent) Reporter() *meter.Reporter { return a.rep }

// Service returns the service name the agent reports.
func (a *Agent) Service() string { return a.cfg.service }

// Shutdown sends the last report and stops the reporter and the span
// processor, within ctx's deadline. Requests still in flight are
// recorded, but not reported; later calls return nil.
func (a *Agent) Shutdown(ctx context.Context) error {
	a.mu.Lock()
	if a.shut {
		a.mu.Unlock()
		return nil
	}
	a.shut = true
	a.mu.Unlock()
	var errs []error
	if a.rep != nil {
		if err := a.rep.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("agent: reporter: %w", err))
		}
	}
	if a.sp != nil {
		if err := a.sp.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("agent: span processor: %w", err))
		}
	}
	return errors.Join(errs...)
}

// enforcementCut fills each window's report with the enforcer's counters
// and, in the enforcement detail section, its CoDel drops (apart from
// shedding) and the pool waits of poolWaits.
func enforcementCut(e *enforce.Enforcer, poolWaits func() []report.PoolWait) func(*report.Report) {
	delta := e.StatsDelta()
	return func(rep *report.Report) {
		s := delta()
		rep.Enforcement = enforcementOf(s)
		d := detailOf(s)
		d.PoolWait = poolWaits()
		if !d.Empty() {
			rep.SetSection(d)
		}
	}
}

func enforcementOf(s enforce.Stats) report.Enforcement {
	var out report.Enforcement
	for i, t := range s.Tiers {
		out.Admitted[i] = t.Admitted
		out.Throttled[i] = t.Throttled
		out.Shed[i] = t.Shed
		out.ShadowThrottled[i] = t.ShadowThrottled
		out.ShadowShed[i] = t.ShadowShed
		out.PriceMultiplier[i] = t.Multiplier
	}
	return out
}

func detailOf(s enforce.Stats) report.EnforcementDetail {
	var out report.EnforcementDetail
	for i, t := range s.Tiers {
		out.Dropped[i] = t.Dropped
		out.ShadowDropped[i] = t.ShadowDropped
	}
	return out
}
