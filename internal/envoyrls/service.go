package envoyrls

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/quota"
)

// PolicySource gives the Service the current policy. PolicyVersion is
// called on every answer and must be cheap; Policy only when the version
// changed (or a rule expired).
type PolicySource interface {
	PolicyVersion() uint64
	Policy() policy.Policy
}

// Service answers ShouldRateLimit. Safe for concurrent use; make one with
// New. Its answer path takes no lock but a bucket shard's and the quota
// gate's, and compiles the policy once per version.
type Service struct {
	rlsv3.UnimplementedRateLimitServiceServer

	cfg  config
	src  PolicySource
	pol  atomic.Pointer[compiled]
	mu   sync.Mutex // serialises compiling
	bs   *buckets
	sbs  *buckets // the shadow throttles' buckets
	gate *quota.Gate
	met  *metrics
	open atomic.Int64 // calls open (tap)
}

var _ rlsv3.RateLimitServiceServer = (*Service)(nil)

// compiled is the policy compiled at one version, good until next (unix
// ns: its first rule's expiry).
type compiled struct {
	version uint64
	c       *policy.Compiled
	next    int64
}

// errBadToken is the refusal of a call without the report token.
const errBadToken = "missing or wrong bearer token: send the collector's report token (its --token), as authorization: Bearer TOKEN"

// New returns a Service that answers from src's policy.
func New(src PolicySource, opts ...Option) (*Service, error) {
	if src == nil {
		return nil, errors.New("envoyrls: nil policy source")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, src: src, bs: newBuckets(cfg.maxKeys), sbs: newBuckets(cfg.maxKeys)}
	if s.gate, err = quota.NewGate(quota.WithMaxTenants(min(cfg.maxKeys, 1_000_000)), quota.WithDefaultCost(cfg.cost)); err != nil {
		return nil, fmt.Errorf("envoyrls: %w", err)
	}
	if s.met, err = newMetrics(cfg.reg, s.bs, s.sbs); err != nil {
		return nil, err
	}
	return s, nil
}

// compiledAt returns the policy compiled for now.
func (s *Service) compiledAt(now time.Time) *policy.Compiled {
	v, n := s.src.PolicyVersion(), now.UnixNano()
	if cur := s.pol.Load(); cur != nil && cur.version == v && n < cur.next {
		return cur.c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.pol.Load(); cur != nil && cur.version == v && n < cur.next {
		return cur.c
	}
	p := s.src.Policy()
	c := policy.Compile(p, now)
	s.pol.Store(&compiled{version: p.Version, c: c, next: c.NextExpiry()})
	return c
}

// plan is what settling a descriptor's answer needs.
type plan struct {
	cost         float64 // RU
	capRU        float64 // > 0: the throttle bucket's cap
	quotaRefused bool    // refused (and counted) by the quota gate
	shadowCap    float64 // > 0: the shadow throttle bucket's cap
	shadowCost   float64 // RU at the shadow prices too
}

// DecideAt answers req at now: the answer path without gRPC. An error
// wraps ErrInvalid.
func (s *Service) DecideAt(now time.Time, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	var dbuf [4]descriptor
	ds, err := parse(req, dbuf[:0])
	if err != nil {
		return nil, err
	}
	c := s.compiledAt(now)
	var pbuf [4]plan
	plans := pbuf[:0]
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK,
		Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(ds))}
	for i := range ds {
		st, p := s.decide(now, c, &ds[i])
		resp.Statuses[i], plans = st, append(plans, p)
		if st.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		}
	}
	s.settle(now, ds, plans, resp.OverallCode == rlsv3.RateLimitResponse_OK)
	return resp, nil
}

// decide answers one descriptor without charging anything.
func (s *Service) decide(now time.Time, c *policy.Compiled, d *descriptor) (*rlsv3.RateLimitResponse_DescriptorStatus, plan) {
	st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
	var p plan
	if d.bad != nil {
		s.met.badDescriptors.Inc()
		s.cfg.log.Debug("rate-limit descriptor refused", "err", d.bad)
		st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
		return st, p
	}
	if d.tags.Tenant == "" {
		return st, p
	}
	ev := c.Eval(d.tags.Tenant, d.tags.Tier)
	eff := ev.Effect()
	unit := s.cfg.cost * eff.Multiplier
	p.cost = unit * float64(d.hits)
	if eff.Throttled && eff.RUPerSecond > 0 {
		p.capRU = eff.RUPerSecond
	}
	if d.negative {
		return st, p
	}
	s.shadow(now, ev.Shadow, d, &p)
	switch {
	case eff.Throttled && eff.RUPerSecond == 0:
		st.Code, st.CurrentLimit = rlsv3.RateLimitResponse_OVER_LIMIT, limitOf(0, unit)
		st.DurationUntilReset = durationpb.New(max(0, ev.Applied.ZeroUntil.Sub(now)))
		return st, p
	case eff.Throttled:
		v := s.bs.check(now, d.tags.Tenant, p.capRU, p.cost)
		st.CurrentLimit, st.LimitRemaining = limitOf(p.capRU, unit), whole(v.remaining/unit)
		st.DurationUntilReset = durationpb.New(v.reset)
		if !v.ok {
			st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
			return st, p
		}
	}
	dec := s.gate.AllowAt(now, d.tags)
	if dec.Shadow {
		s.met.shadow.Inc()
	}
	if !dec.Admit {
		p.quotaRefused = true
		allow, _ := s.gate.Limited(now, d.tags.Tenant)
		st.Code, st.CurrentLimit, st.LimitRemaining = rlsv3.RateLimitResponse_OVER_LIMIT, limitOf(allow, unit), 0
		st.DurationUntilReset = durationpb.New(dec.RetryAfter)
	}
	return st, p
}

// shadow decides what the shadow throttles would answer, and counts a
// would-be OVER_LIMIT; it never changes the answer.
func (s *Service) shadow(now time.Time, o policy.Outcome, d *descriptor, p *plan) {
	c := -1.0
	for _, x := range [2]float64{o.TenantCap, o.TierCap} {
		if x >= 0 && (c < 0 || x < c) {
			c = x
		}
	}
	if c < 0 {
		return
	}
	p.shadowCost = p.cost * o.Multiplier
	if c == 0 {
		s.met.shadow.Inc()
		return
	}
	p.shadowCap = c
	if !s.sbs.check(now, d.tags.Tenant, c, p.shadowCost).ok {
		s.met.shadow.Inc()
	}
}

// settle charges an admitted request's descriptors, or counts a refused
// one's in its tenants' demand; negative hits give RU back.
func (s *Service) settle(now time.Time, ds []descriptor, plans []plan, admitted bool) {
	for i := range ds {
		d, p := &ds[i], &plans[i]
		switch {
		case d.tags.Tenant == "":
		case d.negative:
			if p.capRU > 0 {
				s.bs.charge(now, d.tags.Tenant, p.capRU, -p.cost)
			}
		case admitted:
			if p.capRU > 0 {
				s.bs.charge(now, d.tags.Tenant, p.capRU, p.cost)
			}
			if p.shadowCap > 0 {
				s.sbs.charge(now, d.tags.Tenant, p.shadowCap, p.shadowCost)
			}
			s.gate.ChargeAt(now, d.tags, p.cost)
		case !p.quotaRefused:
			s.gate.RefusedElsewhere(d.tags)
		}
	}
}

// units are the units current_limit is expressed in, from the finest:
// the first in which the cap allows a whole request.
var units = [...]struct {
	u   rlsv3.RateLimitResponse_RateLimit_Unit
	sec float64
}{
	{rlsv3.RateLimitResponse_RateLimit_SECOND, 1},
	{rlsv3.RateLimitResponse_RateLimit_MINUTE, 60},
	{rlsv3.RateLimitResponse_RateLimit_HOUR, 3600},
	{rlsv3.RateLimitResponse_RateLimit_DAY, 86400},
}

// limitOf is a cap of capRU RU/s as requests of unit RU each.
func limitOf(capRU, unit float64) *rlsv3.RateLimitResponse_RateLimit {
	perSec := capRU / unit
	for _, u := range units {
		if n := perSec * u.sec; n >= 1 {
			return &rlsv3.RateLimitResponse_RateLimit{Name: "qtop", RequestsPerUnit: whole(n), Unit: u.u}
		}
	}
	return &rlsv3.RateLimitResponse_RateLimit{Name: "qtop", Unit: rlsv3.RateLimitResponse_RateLimit_SECOND}
}

// whole is v's whole part as a uint32 (0 below 0, saturated above).
func whole(v float64) uint32 {
	switch {
	case !(v > 0):
		return 0
	case v >= math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(v)
}

// Cut returns the RU admitted and refused per tenant since the last Cut,
// for the fleet's sums (quota.Fleet.Observe), as a process's report does.
func (s *Service) Cut() []quota.Usage { return s.gate.Cut() }

// Apply takes the fleet's verdicts for this Service (quota.Fleet.Verdicts)
// at now, as a process takes its reply's.
func (s *Service) Apply(now time.Time, verdicts []quota.Verdict) { s.gate.Apply(now, verdicts) }

// Method is the full name of the one method served.
const Method = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

// ServerOptions are the options of a gRPC server that serves only this
// Service: the credential checked from the stream's headers, before its
// message is read, then the bound on calls open at once (WithMaxCalls) and
// on the time a message may take to arrive (WithReadTimeout), so calls
// that send their headers and nothing else cost little and not for long;
// the message size bound; streams per connection; and
// fixed flow-control windows (a stream's is one message, a connection's
// four), which turn off gRPC's growth of them to 16 MiB, so that a
// connection buffers at most that much unread; and streamWorkers.
func (s *Service) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.InTapHandle(s.tap),
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxConcurrentStreams(s.cfg.streams),
		grpc.InitialWindowSize(MaxMessageBytes),
		grpc.InitialConnWindowSize(4 * MaxMessageBytes),
		grpc.NumStreamWorkers(streamWorkers),
	}
}

// Register registers the Service on gs.
func (s *Service) Register(gs *grpc.Server) { gs.RegisterService(&serviceDesc, s) }

type authedKey struct{}

// tap admits a call from its headers, before its message is read: the
// credential (WithAuth), the admission check (WithAdmission), then a
// place among the calls open (WithMaxCalls),
// held until the call's stream ends; the message must then arrive within
// WithReadTimeout, or the call is cut.
func (s *Service) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if info.FullMethodName != Method {
		return ctx, nil // gRPC answers UNIMPLEMENTED without reading it
	}
	if s.cfg.auth != nil {
		auth := ""
		if v := info.Header.Get("authorization"); len(v) > 0 {
			auth = v[0]
		}
		if !s.cfg.auth(auth) {
			s.met.unauthenticated.Inc()
			return nil, status.Error(codes.Unauthenticated, errBadToken)
		}
		ctx = context.WithValue(ctx, authedKey{}, true)
	}
	if s.cfg.admit != nil {
		if err := s.cfg.admit(); err != nil {
			s.met.refused.Inc()
			if _, ok := status.FromError(err); !ok {
				err = status.Error(codes.Unavailable, err.Error())
			}
			return nil, err
		}
	}
	if s.open.Add(1) > int64(s.cfg.calls) {
		s.open.Add(-1)
		s.met.busy.Inc()
		return nil, status.Errorf(codes.Unavailable, "%d calls open at once: the rate-limit service takes no more until one ends", s.cfg.calls)
	}
	c := &openCall{s: s}
	ctx, c.cancel = context.WithCancel(ctx)
	c.late = time.AfterFunc(s.cfg.read, c.cut)
	c.stop = context.AfterFunc(ctx, c.ended) // the stream ended before the handler did
	return context.WithValue(ctx, callKey{}, c), nil
}

// openCall is a call the tap admitted, until its handler returns (done)
// or its stream ends without it (ended): its place among the calls open
// is given back once, by whichever comes first.
type openCall struct {
	s      *Service
	cancel context.CancelFunc
	late   *time.Timer // cuts the call when its message is late
	stop   func() bool // stops ended
}

type callKey struct{}

func (c *openCall) cut() {
	c.s.met.slow.Inc()
	c.cancel()
}

func (c *openCall) ended() {
	c.late.Stop()
	c.s.open.Add(-1)
}

func (c *openCall) done() {
	c.late.Stop()
	if c.stop() {
		c.s.open.Add(-1)
	}
}

// serviceDesc is RateLimitService's with a handler that ends the call's
// read timeout once its message is in (gRPC calls a unary handler before
// it reads the message: dec reads it) and gives the call's place back
// when it returns.
var serviceDesc = grpc.ServiceDesc{
	ServiceName: rlsv3.RateLimitService_ServiceDesc.ServiceName,
	HandlerType: (*rlsv3.RateLimitServiceServer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "ShouldRateLimit",
		Handler: func(srv any, ctx context.Context, dec func(any) error, intercept grpc.UnaryServerInterceptor) (any, error) {
			c, _ := ctx.Value(callKey{}).(*openCall)
			if c != nil {
				defer c.done()
			}
			in := new(rlsv3.RateLimitRequest)
			if err := dec(in); err != nil {
				return nil, err
			}
			if c != nil {
				c.late.Stop()
			}
			if intercept != nil {
				// A server's interceptors (logging, tracing) see the call,
				// as with generated code.
				return intercept(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: Method},
					func(ctx context.Context, req any) (any, error) {
						return srv.(*Service).ShouldRateLimit(ctx, req.(*rlsv3.RateLimitRequest))
					})
			}
			return srv.(*Service).ShouldRateLimit(ctx, in)
		},
	}},
	Metadata: rlsv3.RateLimitService_ServiceDesc.Metadata,
}

func (s *Service) authorized(ctx context.Context) bool {
	if s.cfg.auth == nil || ctx.Value(authedKey{}) != nil {
		return true
	}
	auth := ""
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("authorization"); len(v) > 0 {
			auth = v[0]
		}
	}
	return s.cfg.auth(auth)
}

// ShouldRateLimit is the gRPC method: Unauthenticated without the
// credential, InvalidArgument for a request beyond the bounds, else the
// answer.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	start := time.Now()
	if !s.authorized(ctx) {
		s.met.unauthenticated.Inc()
		return nil, status.Error(codes.Unauthenticated, errBadToken)
	}
	resp, err := s.DecideAt(s.cfg.now(), req)
	if err != nil {
		s.met.invalid.Inc()
		s.cfg.log.Debug("rate-limit request refused", "err", err)
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
		s.met.over.Inc()
	} else {
		s.met.ok.Inc()
	}
	s.met.latency.Observe(time.Since(start).Seconds())
	return resp, nil
}

// streamWorkers is the goroutines gRPC keeps to serve this Service's
// streams: a call handed to an idle one skips a new goroutine and the
// growth of its stack (runtime.morestack); with none idle, gRPC starts a
// goroutine as it does without them. 4-5% less of the collector's CPU per
// call at 2,000 calls/s from 8 callers (bench/rlsload; bench/README.md).
const streamWorkers = 16
