package collector

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/report"
)

// RateLimitService answers a gateway's rate-limit calls over gRPC from
// the collector's policy, and takes part in fleet quotas as a process
// does: the collector cuts its usage into the fleet's sums and applies
// the fleet's verdicts to it every second. Package internal/envoyrls is
// the one for Envoy's API; cmd/collector makes it (Config.RLS), so that
// only the collector binary links Envoy's types (a qtop with the demo
// links this package, not those).
type RateLimitService interface {
	// ServerOptions are the gRPC server's options (credential check,
	// message bounds); Register registers the service on it.
	ServerOptions() []grpc.ServerOption
	Register(gs *grpc.Server)
	// Cut returns the usage since the last Cut; Apply takes verdicts.
	Cut() []quota.Usage
	Apply(now time.Time, verdicts []quota.Verdict)
}

// RLSDeps is what the collector hands Config.RLS to make the service.
type RLSDeps struct {
	// Policy gives the current policy: PolicyVersion is cheap (one
	// uncontended lock), Policy a copy.
	Policy interface {
		PolicyVersion() uint64
		Policy() policy.Policy
	}
	// Auth checks an "authorization" value against the report token
	// (POST /v1/reports' credential); nil when Config.Token is empty.
	Auth func(authorization string) bool
	// Admit refuses calls, after their credential and before their
	// message is read, while the write-ahead log is replayed: a gRPC
	// status error (Unavailable, saying where the replay is) or nil.
	Admit      func() error
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	Now        func() time.Time
}

// RLSConfig configures the rate-limit service (rls.go). Its fields are
// promoted into Config.
type RLSConfig struct {
	// RLSListen is the gRPC address of the rate-limit service (Envoy's
	// convention is 8081); empty: off. It serves over TLS with Config.TLS.
	RLSListen string
	// RLS makes the service; required with RLSListen.
	RLS func(RLSDeps) (RateLimitService, error)
}

// Validate checks the address and that a service is given for it.
func (c RLSConfig) Validate() error {
	if c.RLSListen == "" {
		return nil
	}
	if err := checkAddr(c.RLSListen); err != nil {
		return fmt.Errorf("%w: rls listen %q: %v", ErrConfig, c.RLSListen, err)
	}
	if c.RLS == nil {
		return fmt.Errorf("%w: rls listen %s without a rate-limit service (Config.RLS)", ErrConfig, c.RLSListen)
	}
	return nil
}

// maxRLSConns bounds the rate-limit service's connections: a gateway
// multiplexes its calls on a few, but a mesh whose every sidecar asks
// opens some per pod (an idle connection costs about 40 KiB; one beyond
// the bound is closed at once and counted, conncap.go).
const maxRLSConns = 4096

// rlsSource is the rate-limit service's name in the fleet's sums; in
// parentheses, so that no reporting process has it.
const rlsSource = "(envoy-rls)\x00\x00"

// rlsPart is the rate-limit service's part of the server: made in open,
// listening in Start, its fleet-quota exchange in Tick (a feature with
// tick alone), stopped first in Shutdown.
type rlsPart struct {
	svc   RateLimitService
	quota *fleetQuota
	grpc  *grpc.Server
	ln    net.Listener
	last  time.Time // of the last exchange; only tick uses it
	// used is when the service last had calls to charge (unix ns), for
	// AppliedBy.
	used atomic.Int64
}

// usedSince reports whether a gateway asked the service since t.
func (p *rlsPart) usedSince(t time.Time) bool {
	return p != nil && p.used.Load() >= t.UnixNano()
}

var _ feature = (*rlsPart)(nil)

func (p *rlsPart) merge(*report.Report, time.Time, bool) {}
func (p *rlsPart) snapshot(*api.Snapshot, time.Time)     {}
func (p *rlsPart) reply(_ *report.Report, _ time.Time, r report.Reply, _ bool) report.Reply {
	return r
}

// rlsPolicy is the policy as the service reads it.
type rlsPolicy struct{ pp *policyPart }

func (r rlsPolicy) PolicyVersion() uint64 {
	r.pp.mu.Lock()
	defer r.pp.mu.Unlock()
	return r.pp.p.Version
}

func (r rlsPolicy) Policy() policy.Policy { return r.pp.current() }

// newRLSPart makes the service when cfg.RLSListen is set (nil otherwise).
func newRLSPart(cfg Config, pol *policyPart, q *fleetQuota, auth func(*http.Request, Role) (string, error), boot *bootState) (*rlsPart, error) {
	if cfg.RLSListen == "" {
		return nil, nil
	}
	if err := checkRLSExposure(&cfg); err != nil {
		return nil, err
	}
	deps := RLSDeps{Policy: rlsPolicy{pol}, Admit: boot.grpcGate, Registerer: cfg.Registerer, Logger: cfg.Logger, Now: cfg.Now}
	if cfg.Token != "" {
		deps.Auth = func(header string) bool {
			_, err := auth(&http.Request{Header: http.Header{"Authorization": {header}}}, RoleReport)
			return err == nil
		}
	}
	svc, err := cfg.RLS(deps)
	if err != nil {
		return nil, fmt.Errorf("%w: rls: %w", ErrConfig, err)
	}
	return &rlsPart{svc: svc, quota: q}, nil
}

// checkRLSExposure refuses the service off loopback while calls need no
// credential or travel in clear, unless Config.Insecure says so.
func checkRLSExposure(c *Config) error {
	return checkGRPCExposure(c, "--rls-listen", c.RLSListen, "anyone could ask and spend tenants' limits", "calls")
}

// tick exchanges with the fleet's sums, as a report and its reply do: the
// service's usage since the last tick in, its verdicts out.
func (p *rlsPart) tick(_ context.Context, now time.Time) {
	usage := p.svc.Cut()
	if len(usage) > 0 {
		p.used.Store(now.UnixNano())
	}
	window := now.Sub(p.last)
	if p.last.IsZero() || window <= 0 || window > time.Minute {
		window = time.Second
	}
	p.last = now
	q := p.quota
	q.mu.Lock()
	q.limitsLocked(now)
	q.fleet.Observe(now, rlsSource, window, usage)
	verdicts := q.fleet.Verdicts(now, rlsSource, nil)
	q.mu.Unlock()
	p.svc.Apply(now, verdicts)
}

// listen serves the service on addr (over TLS with e.tls when not nil)
// on a goroutine of e.wg.
func (p *rlsPart) listen(addr string, e grpcEnv) error {
	gs, ln, err := serveGRPC(grpcListener{name: "rate-limit service", label: "rls", addr: addr, maxConns: maxRLSConns,
		raise: "a gateway multiplexes its calls on a few connections, a mesh opens some per sidecar: check what opens so many",
		opts:  p.svc.ServerOptions(), register: p.svc.Register}, e)
	if err != nil {
		return err
	}
	p.grpc, p.ln = gs, ln
	return nil
}

// stop stops the gRPC server: its calls end within ctx.
func (p *rlsPart) stop(ctx context.Context) {
	if p == nil || p.grpc == nil {
		return
	}
	done := make(chan struct{})
	go func() { p.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		p.grpc.Stop()
		<-done
	}
}

// RLSAddr returns the address the rate-limit service listens on ("" when
// off).
func (s *Server) RLSAddr() string {
	if s.rls == nil || s.rls.ln == nil {
		return ""
	}
	return s.rls.ln.Addr().String()
}
