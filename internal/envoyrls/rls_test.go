package envoyrls_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/qtop-dev/qtop/internal/envoyrls"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/tenant"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// source is a policy held in memory, as the collector's policy part is.
type source struct {
	mu sync.Mutex
	p  policy.Policy
}

func (s *source) PolicyVersion() uint64 { s.mu.Lock(); defer s.mu.Unlock(); return s.p.Version }
func (s *source) Policy() policy.Policy { s.mu.Lock(); defer s.mu.Unlock(); return s.p }
func (s *source) set(rules ...policy.Rule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.p.Version++
	s.p.Rules = rules
}

func throttle(tenantName string, ru float64) policy.Rule {
	return policy.Rule{ID: "t-" + tenantName, Tenant: tenantName, Action: policy.Throttle, RUPerSecond: ru,
		Expires: t0.Add(time.Hour), Reason: "test"}
}

// clock is a fake clock the tests move.
type clock struct{ n atomic.Int64 }

func newClock() *clock               { c := &clock{}; c.n.Store(t0.UnixNano()); return c }
func (c *clock) now() time.Time      { return time.Unix(0, c.n.Load()).UTC() }
func (c *clock) add(d time.Duration) { c.n.Add(int64(d)) }
func (c *clock) set(t time.Time)     { c.n.Store(t.UnixNano()) }
func entry(k, v string) *rlcommon.RateLimitDescriptor_Entry {
	return &rlcommon.RateLimitDescriptor_Entry{Key: k, Value: v}
}

// req is a request of one descriptor per list of key, value pairs.
func req(descs ...[]string) *rlsv3.RateLimitRequest {
	r := &rlsv3.RateLimitRequest{Domain: "edge"}
	for _, kv := range descs {
		d := &rlcommon.RateLimitDescriptor{}
		for i := 0; i+1 < len(kv); i += 2 {
			d.Entries = append(d.Entries, entry(kv[i], kv[i+1]))
		}
		r.Descriptors = append(r.Descriptors, d)
	}
	return r
}

// serve serves svc over loopback gRPC and returns a client of it.
// serveClocked serves a Service of src's policy on the clock it returns
// (newClock's) and returns a client of it.
func serveClocked(t *testing.T, src *source) (rlsv3.RateLimitServiceClient, *clock) {
	t.Helper()
	clk := newClock()
	svc, err := envoyrls.New(src, envoyrls.WithClock(clk.now))
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, svc), clk
}

func serve(t *testing.T, svc *envoyrls.Service) rlsv3.RateLimitServiceClient {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(svc.ServerOptions()...)
	svc.Register(gs)
	done := make(chan struct{})
	go func() { defer close(done); gs.Serve(ln) }()
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close(); gs.Stop(); <-done })
	return rlsv3.NewRateLimitServiceClient(cc)
}

func ask(t *testing.T, c rlsv3.RateLimitServiceClient, r *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := c.ShouldRateLimit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestUnknownTenantsAndNoRuleAreOK(t *testing.T) {
	src := &source{}
	src.set(throttle("bigcorp", 10))
	c, _ := serveClocked(t, src)
	for _, r := range []*rlsv3.RateLimitRequest{
		req([]string{"tenant", "acme"}),
		req([]string{"tenant", "acme", "route", "GET /x", "tier", "T2"}),
		req([]string{"generic_key", "anything"}),
		req([]string{"remote_address", "10.0.0.1"}, []string{"tenant", "never-seen"}),
	} {
		resp := ask(t, c, r)
		if resp.OverallCode != rlsv3.RateLimitResponse_OK || len(resp.Statuses) != len(r.Descriptors) {
			t.Fatalf("%v: %v", r, resp)
		}
		for _, st := range resp.Statuses {
			if st.Code != rlsv3.RateLimitResponse_OK || st.CurrentLimit != nil {
				t.Errorf("%v: status %v", r, st)
			}
		}
	}
}

// TestThrottleSteps: a throttle of 10 RU/s at 1 RU a request admits its
// burst of 10 at t0, refuses the 11th until 100 ms later, and refills
// continuously; each answer's fields are exact.
func TestThrottleSteps(t *testing.T) {
	src := &source{}
	src.set(throttle("bigcorp", 10))
	c, clk := serveClocked(t, src)
	big := req([]string{"tenant", "bigcorp", "route", "GET /reports"})
	for i := range 10 {
		st := ask(t, c, big).Statuses[0]
		if st.Code != rlsv3.RateLimitResponse_OK || st.LimitRemaining != uint32(9-i) {
			t.Fatalf("request %d: %v", i, st)
		}
		if st.CurrentLimit.RequestsPerUnit != 10 || st.CurrentLimit.Unit != rlsv3.RateLimitResponse_RateLimit_SECOND {
			t.Fatalf("request %d: limit %v", i, st.CurrentLimit)
		}
		if got, want := st.DurationUntilReset.AsDuration(), time.Duration(i+1)*100*time.Millisecond; got != want {
			t.Fatalf("request %d: reset %v, want %v", i, got, want)
		}
	}
	steps := []struct {
		at   time.Duration
		code rlsv3.RateLimitResponse_Code
		wait time.Duration
	}{
		{0, rlsv3.RateLimitResponse_OVER_LIMIT, 100 * time.Millisecond},
		{50 * time.Millisecond, rlsv3.RateLimitResponse_OVER_LIMIT, 50 * time.Millisecond},
		{100 * time.Millisecond, rlsv3.RateLimitResponse_OK, time.Second},
		{100 * time.Millisecond, rlsv3.RateLimitResponse_OVER_LIMIT, 100 * time.Millisecond},
		{350 * time.Millisecond, rlsv3.RateLimitResponse_OK, 850 * time.Millisecond}, // 2.5 − 1 held
	}
	for i, s := range steps {
		clk.set(t0.Add(s.at))
		resp := ask(t, c, big)
		st := resp.Statuses[0]
		if resp.OverallCode != s.code || st.Code != s.code || st.DurationUntilReset.AsDuration() != s.wait {
			t.Fatalf("step %d at %v: %v %v, want %v reset %v", i, s.at, resp.OverallCode, st, s.code, s.wait)
		}
	}
	// Another tenant is not held back by bigcorp's bucket.
	if resp := ask(t, c, req([]string{"tenant", "acme"})); resp.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatalf("acme: %v", resp)
	}
}

// TestPolicyChangeTakesEffect: the next answer after a change follows the
// new policy; a throttle of 0 refuses until the rule expires; lifting it
// admits again, and an expired rule stops counting without a change.
func TestPolicyChangeTakesEffect(t *testing.T) {
	src := &source{}
	c, clk := serveClocked(t, src)
	big := req([]string{"tenant", "bigcorp"})
	if got := ask(t, c, big).OverallCode; got != rlsv3.RateLimitResponse_OK {
		t.Fatalf("no rule: %v", got)
	}
	src.set(throttle("bigcorp", 0))
	st := ask(t, c, big).Statuses[0]
	if st.Code != rlsv3.RateLimitResponse_OVER_LIMIT || st.DurationUntilReset.AsDuration() != time.Hour || st.CurrentLimit.RequestsPerUnit != 0 {
		t.Fatalf("throttle 0: %v", st)
	}
	src.set()
	if got := ask(t, c, big).OverallCode; got != rlsv3.RateLimitResponse_OK {
		t.Fatalf("lifted: %v", got)
	}
	src.set(throttle("bigcorp", 0))
	clk.set(t0.Add(time.Hour)) // the rule expires
	if got := ask(t, c, big).OverallCode; got != rlsv3.RateLimitResponse_OK {
		t.Fatalf("expired: %v", got)
	}
}

// TestPriceTierAndHits: a price rule multiplies the cost, a tier rule
// caps each tenant of the descriptor's tier, hits_addend counts, and a
// request with one refused descriptor charges none of its descriptors.
func TestPriceTierAndHits(t *testing.T) {
	src := &source{}
	exp := t0.Add(time.Hour)
	src.set(policy.Rule{ID: "p", Tenant: "acme", Action: policy.Price, Multiplier: 2, Expires: exp, Reason: "x"},
		policy.Rule{ID: "t3", Tier: tenant.T3, Action: policy.Throttle, RUPerSecond: 20, Expires: exp, Reason: "x"})
	c, _ := serveClocked(t, src)
	acme := req([]string{"tenant", "acme", "tier", "T3"})
	acme.HitsAddend = 4 // 4 hits × 2 = 8 RU of a 20 RU burst
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		st := ask(t, c, acme).Statuses[0]
		if st.Code != want {
			t.Fatalf("request %d: %v, want %v", i, st, want)
		}
		if st.CurrentLimit.RequestsPerUnit != 10 { // 20 RU/s at 2 RU a hit
			t.Fatalf("request %d: limit %v", i, st.CurrentLimit)
		}
	}
	// The descriptor's own hits_addend wins over the request's.
	one := req([]string{"tenant", "acme", "tier", "T3"})
	one.Descriptors[0].HitsAddend = wrapperspb.UInt64(2)
	if st := ask(t, c, one).Statuses[0]; st.Code != rlsv3.RateLimitResponse_OK || st.LimitRemaining != 0 {
		t.Fatalf("4 RU left, 4 asked: %v", st)
	}
	// beta (T3, no price) has its own bucket; with acme refused, the
	// request is refused and beta is not charged.
	both := req([]string{"tenant", "beta", "tier", "T3"}, []string{"tenant", "acme", "tier", "T3"})
	resp := ask(t, c, both)
	if resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || resp.Statuses[0].Code != rlsv3.RateLimitResponse_OK {
		t.Fatalf("both: %v", resp)
	}
	if st := ask(t, c, req([]string{"tenant", "beta", "tier", "T3"})).Statuses[0]; st.LimitRemaining != 19 {
		t.Fatalf("beta charged by a refused request: %v", st)
	}
	// Negative hits give RU back.
	back := req([]string{"tenant", "beta", "tier", "T3"})
	back.Descriptors[0].IsNegativeHits, back.HitsAddend = true, 5
	ask(t, c, back)
	if st := ask(t, c, req([]string{"tenant", "beta", "tier", "T3"})).Statuses[0]; st.LimitRemaining != 19 {
		t.Fatalf("after giving 5 back: %v", st)
	}
}

// TestCostOverBurst: a request that costs more than a throttle's bucket
// holds is admitted when the bucket is full, into debt; until the bucket
// is full again it is refused with the time until then. Before, it was
// refused every time with duration_until_reset 0: retry at once, forever.
func TestCostOverBurst(t *testing.T) {
	src := &source{}
	src.set(policy.Rule{ID: "t", Tenant: "bigcorp", Action: policy.Throttle, RUPerSecond: 20, Expires: t0.Add(time.Hour), Reason: "x"})
	c, clk := serveClocked(t, src)
	big := req([]string{"tenant", "bigcorp"})
	big.HitsAddend = 30 // 30 RU, the bucket holds 20
	if st := ask(t, c, big).Statuses[0]; st.Code != rlsv3.RateLimitResponse_OK {
		t.Fatalf("on a full bucket: %v, want OK", st)
	}
	st := ask(t, c, big).Statuses[0]
	if st.Code != rlsv3.RateLimitResponse_OVER_LIMIT || st.DurationUntilReset.AsDuration() != 1500*time.Millisecond {
		t.Fatalf("10 RU in debt: %v, want OVER_LIMIT until full in 1.5 s", st)
	}
	clk.add(1500 * time.Millisecond)
	if st := ask(t, c, big).Statuses[0]; st.Code != rlsv3.RateLimitResponse_OK {
		t.Fatalf("full again: %v, want OK", st)
	}
}

// TestFleetQuota: the Service takes part in fleet quotas as a process:
// its admitted RU are cut for the fleet's sums, and an allowance from the
// fleet's verdicts refuses once spent.
func TestFleetQuota(t *testing.T) {
	src := &source{}
	clk := newClock()
	svc, err := envoyrls.New(src, envoyrls.WithClock(clk.now))
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, svc)
	big := req([]string{"tenant", "bigcorp", "tier", "T2"})
	for range 3 {
		ask(t, c, big)
	}
	u := svc.Cut()
	if len(u) != 1 || u[0] != (quota.Usage{Tenant: "bigcorp", Tier: tenant.T2, Admitted: 3}) {
		t.Fatalf("usage %+v", u)
	}
	svc.Apply(clk.now(), []quota.Verdict{{Tenant: "bigcorp", For: 3 * time.Second, Allowance: 10}})
	ok, over := 0, 0
	for range 5 {
		switch ask(t, c, big).OverallCode {
		case rlsv3.RateLimitResponse_OK:
			ok++
		default:
			over++
		}
	}
	// A 50 ms burst of 10 RU/s is 0.5 RU: the first request is admitted
	// (into debt), the others wait 100 ms.
	if ok != 1 || over != 4 {
		t.Fatalf("ok %d over %d", ok, over)
	}
	st := ask(t, c, big).Statuses[0]
	if st.CurrentLimit.RequestsPerUnit != 10 || st.DurationUntilReset.AsDuration() != 50*time.Millisecond {
		t.Fatalf("quota status %v", st)
	}
	u = svc.Cut()
	if len(u) != 1 || u[0].Admitted != 1 || u[0].Refused != 5 {
		t.Fatalf("usage %+v", u)
	}
}

func TestCredential(t *testing.T) {
	src := &source{}
	svc, err := envoyrls.New(src, envoyrls.WithAuth(func(h string) bool { return h == "Bearer s3cret" }))
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, svc)
	for _, h := range []string{"", "Bearer wrong", "s3cret"} {
		ctx := context.Background()
		if h != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", h)
		}
		_, err := c.ShouldRateLimit(ctx, req([]string{"tenant", "acme"}))
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("authorization %q: %v, want Unauthenticated", h, err)
		}
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer s3cret")
	if _, err := c.ShouldRateLimit(ctx, req([]string{"tenant", "acme"})); err != nil {
		t.Fatal(err)
	}
}

// TestAdmission: the admission check runs after the credential and
// before the message is read; the call it refuses gets its status
// (Unavailable for an error that carries none) and no answer is made.
func TestAdmission(t *testing.T) {
	var refusing atomic.Bool
	var asked atomic.Int64
	var refusal atomic.Pointer[error]
	plain := errors.New("replaying the log")
	refusal.Store(&plain)
	admit := func() error {
		asked.Add(1)
		if refusing.Load() {
			return *refusal.Load()
		}
		return nil
	}
	reg := prometheus.NewRegistry()
	svc, err := envoyrls.New(&source{}, envoyrls.WithAuth(func(h string) bool { return h == "Bearer tok" }),
		envoyrls.WithAdmission(admit), envoyrls.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, svc)
	authed := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer tok")
	refusing.Store(true)
	if _, err := c.ShouldRateLimit(context.Background(), req([]string{"tenant", "acme"})); status.Code(err) != codes.Unauthenticated || asked.Load() != 0 {
		t.Fatalf("no credential while refusing: %v, admission asked %d times; want Unauthenticated, never asked", err, asked.Load())
	}
	_, err = c.ShouldRateLimit(authed, req([]string{"tenant", "acme"}))
	if status.Code(err) != codes.Unavailable || status.Convert(err).Message() != plain.Error() {
		t.Fatalf("refused: %v, want Unavailable %q", err, plain)
	}
	full := status.Error(codes.ResourceExhausted, "full")
	refusal.Store(&full)
	if _, err := c.ShouldRateLimit(authed, req([]string{"tenant", "acme"})); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("refused with a status: %v, want that status", err)
	}
	refused, answers := rlsCounts(t, reg)
	if refused != 2 || answers != 0 {
		t.Errorf("refused calls counted %v and answers made %v, want 2 and 0", refused, answers)
	}
	refusing.Store(false)
	if resp, err := c.ShouldRateLimit(authed, req([]string{"tenant", "acme"})); err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatalf("admitted: %v %v", resp, err)
	}
}

// rlsCounts is the refused calls counted on reg and the answers made (the
// answer histogram's count).
func rlsCounts(t *testing.T, reg *prometheus.Registry) (refused float64, answers uint64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "qtop_rls_requests_total":
				for _, l := range m.GetLabel() {
					if l.GetName() == "code" && l.GetValue() == "refused" {
						refused = m.GetCounter().GetValue()
					}
				}
			case "qtop_rls_answer_seconds":
				answers = m.GetHistogram().GetSampleCount()
			}
		}
	}
	return refused, answers
}

func TestBadRequests(t *testing.T) {
	svc, err := envoyrls.New(&source{})
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, svc)
	many := req()
	for range envoyrls.MaxDescriptors + 1 {
		many.Descriptors = append(many.Descriptors, req([]string{"tenant", "a"}).Descriptors[0])
	}
	wide := req(nil)
	for range envoyrls.MaxEntries + 1 {
		wide.Descriptors[0].Entries = append(wide.Descriptors[0].Entries, entry("k", "v"))
	}
	hits := req([]string{"tenant", "a"})
	hits.HitsAddend = envoyrls.MaxHits + 1
	cases := []struct {
		name string
		r    *rlsv3.RateLimitRequest
		want string
	}{
		{"no descriptor", req(), "0 descriptors"},
		{"too many descriptors", many, "33 descriptors"},
		{"hits", hits, "hits_addend 1048577"},
	}
	for _, tc := range cases {
		_, err := c.ShouldRateLimit(context.Background(), tc.r)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want InvalidArgument with %q", tc.name, err, tc.want)
		}
	}
	// A descriptor that cannot be read is answered OVER_LIMIT on its own,
	// beside one that can: its values may come from the client (a tier
	// from a header), and a refused call passes where Envoy fails open.
	for _, tc := range []struct {
		name string
		bad  *rlsv3.RateLimitRequest
	}{
		{"too many entries", wide},
		{"long tenant", req([]string{"tenant", strings.Repeat("x", tenant.MaxTenantLen+1)})},
		{"bad tier", req([]string{"tenant", "a", "tier", "gold"})},
		{"twice", req([]string{"tenant", "a", "tenant", "b"})},
		{"route alone", req([]string{"route", "GET /"})},
		{"long key", req([]string{strings.Repeat("k", envoyrls.MaxKeyLen+1), "v"})},
		{"long value", req([]string{"k", strings.Repeat("v", envoyrls.MaxValueLen+1)})},
		{"reserved tenant", req([]string{"tenant", "(untagged)"})},
	} {
		r := req([]string{"tenant", "good"})
		r.Descriptors = append(r.Descriptors, tc.bad.Descriptors[0])
		resp, err := c.ShouldRateLimit(context.Background(), r)
		if err != nil {
			t.Errorf("%s: %v, want an answer", tc.name, err)
			continue
		}
		if resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || resp.Statuses[0].Code != rlsv3.RateLimitResponse_OK ||
			resp.Statuses[1].Code != rlsv3.RateLimitResponse_OVER_LIMIT {
			t.Errorf("%s: %v, want the good descriptor OK and the bad one OVER_LIMIT", tc.name, resp)
		}
	}
	// Beyond the message bound gRPC refuses before decoding.
	big := req()
	for range 200 {
		big.Descriptors = append(big.Descriptors, req([]string{"k", strings.Repeat("v", 500)}).Descriptors[0])
	}
	if _, err := c.ShouldRateLimit(context.Background(), big); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("100 KB message: %v, want ResourceExhausted", err)
	}
}

// TestBucketsBounded: a tier rule matches any tenant; the buckets stay
// within their bound however many tenants a client names.
func TestBucketsBounded(t *testing.T) {
	src := &source{}
	src.set(policy.Rule{ID: "t3", Tier: tenant.T3, Action: policy.Throttle, RUPerSecond: 5, Expires: t0.Add(time.Hour), Reason: "x"})
	clk := newClock()
	svc, err := envoyrls.New(src, envoyrls.WithClock(clk.now), envoyrls.WithMaxKeys(32))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5000 {
		r := req([]string{"tenant", "t" + strconv.Itoa(i), "tier", "T3"})
		if _, err := svc.DecideAt(clk.now(), r); err != nil {
			t.Fatal(err)
		}
	}
	if n := envoyrls.Buckets(svc); n > 32 || n < 16 {
		t.Fatalf("%d buckets tracked, bound 32", n)
	}
}

// TestClockBackwards: a clock that goes back creates no tokens.
func TestClockBackwards(t *testing.T) {
	src := &source{}
	src.set(throttle("bigcorp", 1))
	clk := newClock()
	svc, err := envoyrls.New(src, envoyrls.WithClock(clk.now))
	if err != nil {
		t.Fatal(err)
	}
	r := req([]string{"tenant", "bigcorp"})
	if resp, _ := svc.DecideAt(clk.now(), r); resp.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatal(resp)
	}
	for _, back := range []time.Duration{0, -time.Second, -time.Hour} {
		if resp, _ := svc.DecideAt(t0.Add(back), r); resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("at %v: %v", back, resp)
		}
	}
}
