package otlpin

import (
	"context"
	"encoding/binary"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/report"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/proto"
)

// t0 is the fixed instant the tests' clocks start at.
var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// sink decodes the reports a receiver merges and keeps their rows.
type sink struct {
	mu      sync.Mutex
	reports []*report.Report
	refuse  int           // refuse the next n reports
	retry   time.Duration // with this delay (0: for good)
}

func (s *sink) Consume(_ context.Context, rep *report.Report, _ []byte) (report.Reply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuse > 0 {
		s.refuse--
		if s.retry > 0 {
			return report.Reply{}, report.NewRetryable(errRefused, s.retry)
		}
		return report.Reply{}, errRefused
	}
	s.reports = append(s.reports, rep) // the receiver never reuses a report it handed over
	return report.Reply{Accepted: true}, nil
}

type errString string

func (e errString) Error() string { return string(e) }

const errRefused = errString("refused")

// rowKey names a merged row: service/tenant/route/kind.
type rowKey struct{ service, tenant, route, kind string }

type rowSum struct {
	count, errors uint64
	dur           time.Duration
	tier          string
}

func (s *sink) rows() map[rowKey]rowSum {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[rowKey]rowSum{}
	for _, rep := range s.reports {
		for _, r := range rep.Rows {
			k := rowKey{rep.Source.Service, r.Tenant, r.Route, r.Kind.String()}
			v := out[k]
			v.count += r.Count
			v.errors += r.Errors
			v.dur += r.Duration
			if r.Tier.Valid() {
				v.tier = r.Tier.String()
			}
			out[k] = v
		}
	}
	return out
}

func keysOf(m map[rowKey]rowSum) []rowKey {
	var ks []rowKey
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].tenant+ks[i].route+ks[i].kind < ks[j].tenant+ks[j].route+ks[j].kind })
	return ks
}

func newTestReceiver(t *testing.T, s *sink, clk *fakeClock, opts ...Option) *Receiver {
	t.Helper()
	r, err := New(s, append([]Option{WithClock(clk.Now)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown(t.Context()) })
	return r
}

// Span builders.

func str(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func num(k string, v int64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}}
}

func traceIDOf(n uint64) []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b[8:], n)
	b[0] = 1
	return b
}

func spanIDOf(n uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, n|1<<63)
	return b
}

type spanSpec struct {
	trace, id, parent uint64
	name              string
	kind              tracepb.Span_SpanKind
	start             time.Time
	dur               time.Duration
	status            tracepb.Status_StatusCode
	attrs             []*commonpb.KeyValue
}

func (s spanSpec) proto() *tracepb.Span {
	sp := &tracepb.Span{
		TraceId: traceIDOf(s.trace), SpanId: spanIDOf(s.id), Name: s.name, Kind: s.kind,
		StartTimeUnixNano: uint64(s.start.UnixNano()), EndTimeUnixNano: uint64(s.start.Add(s.dur).UnixNano()),
		Attributes: s.attrs,
	}
	if s.start.IsZero() {
		sp.StartTimeUnixNano, sp.EndTimeUnixNano = 0, 0
	}
	if s.parent != 0 {
		sp.ParentSpanId = spanIDOf(s.parent)
	}
	if s.status != 0 {
		sp.Status = &tracepb.Status{Code: s.status}
	}
	return sp
}

func request(service string, spans ...spanSpec) *coltracepb.ExportTraceServiceRequest {
	ps := make([]*tracepb.Span, len(spans))
	for i, s := range spans {
		ps[i] = s.proto()
	}
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource:   &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("service.name", service), str("service.instance.id", "i-1"), str("host.name", "h1")}},
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: ps}},
	}}}
}

func marshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func server(trace uint64, tn, route string, dur time.Duration) spanSpec {
	return spanSpec{trace: trace, id: trace*100 + 1, name: "GET", kind: tracepb.Span_SPAN_KIND_SERVER, start: t0, dur: dur,
		attrs: []*commonpb.KeyValue{str("tenant.id", tn), str("http.route", route), num("http.response.status_code", 200)}}
}

// pgSpan is a statement span of trace; the statements of one trace follow
// each other (id × 20 ms after t0), so none overlaps another.
func pgSpan(trace, id uint64, query string, dur time.Duration, extra ...*commonpb.KeyValue) spanSpec {
	return spanSpec{trace: trace, id: trace*100 + id, parent: trace*100 + 1, name: "pg.query:SELECT", kind: tracepb.Span_SPAN_KIND_CLIENT,
		start: t0.Add(time.Duration(id) * 20 * time.Millisecond), dur: dur, attrs: append([]*commonpb.KeyValue{str("db.system", "postgresql"), str("db.statement", query)}, extra...)}
}

// meterConn registers a connMeter for the connection tapCtx(conn) comes
// from, as GRPCListener does for a connection it accepts.
func meterConn(r *Receiver, conn string) *connMeter {
	m := newConnMeter(r, (&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: len(conn)}).String())
	r.meters.Store(m.key, m)
	return m
}

// admitStream has the tap admit a stream of connection conn (tapCtx),
// failing the test if it is refused; the stream's context is returned.
func admitStream(t *testing.T, r *Receiver, conn string) context.Context {
	t.Helper()
	ctx, cancel := tapCtx(conn)
	t.Cleanup(cancel)
	sctx, err := r.tapGRPC(ctx, &tap.Info{FullMethodName: exportMethod})
	if err != nil {
		t.Fatal(err)
	}
	return sctx
}

// serveGRPC serves r over a real gRPC server on loopback, on GRPCListener
// (metered), with opts beside GRPCServerOptions, until the test ends, and
// returns its address.
func serveGRPC(t *testing.T, r *Receiver, opts ...grpc.ServerOption) string {
	t.Helper()
	gs := grpc.NewServer(append(r.GRPCServerOptions(), opts...)...)
	r.RegisterGRPC(gs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(r.GRPCListener(ln))
	t.Cleanup(gs.Stop)
	return ln.Addr().String()
}

// reserveConnWait takes n bytes for connection conn ("": none), at most
// half the budget per connection, waiting up to wait (or ctx's end) for
// releases while they do not fit; release gives them back (once).
func (b *memBudget) reserveConnWait(ctx context.Context, conn string, n int64, wait time.Duration) (func(), error) {
	if err := b.takeWait(ctx, conn, n, wait); err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { b.give(conn, n) }) }, nil
}
