package envoyrls

import (
	"context"
	"github.com/qtop-dev/qtop/tenant"
	"net"
	"testing"
	"testing/synctest"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/qtop-dev/qtop/policy"
)

// noPolicy is a policy source with no rule.
type noPolicy struct{}

func (noPolicy) PolicyVersion() uint64 { return 1 }
func (noPolicy) Policy() policy.Policy { return policy.Policy{Version: 1} }

// A call is admitted from its headers while fewer than WithMaxCalls are
// open, and must bring its message within WithReadTimeout: a call that
// does not is cut and gives its place back, as does one whose handler
// returned or whose stream ended. Fake time: the bubble's clock.
func TestCallsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(noPolicy{}, WithMaxCalls(2), WithReadTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		info := &tap.Info{FullMethodName: Method}
		admit := func() (context.Context, context.CancelFunc, error) {
			stream, end := context.WithCancel(context.Background()) // the stream's context, ended by gRPC
			ctx, err := s.tap(stream, info)
			return ctx, end, err
		}
		busy := func() float64 { return testutil.ToFloat64(s.met.busy) }
		slow := func() float64 { return testutil.ToFloat64(s.met.slow) }

		a, endA, err := admit()
		if err != nil {
			t.Fatal(err)
		}
		b, endB, err := admit()
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := admit(); status.Code(err) != codes.Unavailable || busy() != 1 {
			t.Fatalf("a third call: %v, busy %v", err, busy())
		}
		// b's message comes and its handler answers: its place is given
		// back, and its read timeout no longer runs.
		resp, err := serviceDesc.Methods[0].Handler(s, b, func(v any) error {
			v.(*rlsv3.RateLimitRequest).Domain = "edge"
			v.(*rlsv3.RateLimitRequest).Descriptors = []*rlcommon.RateLimitDescriptor{{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "tenant", Value: "acme"}}}}
			return nil
		}, nil)
		if err != nil || resp.(*rlsv3.RateLimitResponse).OverallCode != rlsv3.RateLimitResponse_OK {
			t.Fatalf("answer: %v %v", resp, err)
		}
		endB()
		if n := s.open.Load(); n != 1 {
			t.Fatalf("%d calls open after an answer, want 1", n)
		}
		time.Sleep(time.Second / 2)
		c, endC, err := admit()
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second/2 - time.Nanosecond)
		synctest.Wait()
		if a.Err() != nil || c.Err() != nil || slow() != 0 {
			t.Fatalf("before the read timeout: %v %v, slow %v", a.Err(), c.Err(), slow())
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		// a's message is late: it is cut, and its stream ends (gRPC ends
		// it when the handler's read fails), which gives its place back.
		if a.Err() == nil || slow() != 1 || c.Err() != nil {
			t.Fatalf("after a's read timeout: %v, slow %v, c %v", a.Err(), slow(), c.Err())
		}
		endA()
		synctest.Wait()
		if n := s.open.Load(); n != 1 {
			t.Fatalf("%d calls open after a's cut, want 1", n)
		}
		// c's stream is reset by its client before its message: its place
		// is given back and it is not counted slow.
		endC()
		synctest.Wait()
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := s.open.Load(); n != 0 || slow() != 1 {
			t.Fatalf("%d calls open, slow %v; want 0 and 1", n, slow())
		}
	})
}

// Calls that send their headers and nothing else are cut after the read
// timeout over a real gRPC server, and the service answers again.
func TestIdleCallsCut(t *testing.T) {
	s, err := New(noPolicy{}, WithMaxCalls(4), WithReadTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(s.ServerOptions()...)
	s.Register(gs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln)
	defer gs.Stop()
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // without the cut: DEADLINE_EXCEEDED, not a hang
	defer cancel()
	var idle []grpc.ClientStream
	for range 4 {
		st, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, Method)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, st)
	}
	for i, st := range idle {
		var out rlsv3.RateLimitResponse
		if err := st.RecvMsg(&out); status.Code(err) != codes.Canceled {
			t.Fatalf("idle call %d: %v, want CANCELLED (cut)", i, err)
		}
	}
	if got := testutil.ToFloat64(s.met.slow); got != 4 {
		t.Errorf("slow %v, want 4", got)
	}
	resp, err := rlsv3.NewRateLimitServiceClient(cc).ShouldRateLimit(t.Context(), &rlsv3.RateLimitRequest{Domain: "edge",
		Descriptors: []*rlcommon.RateLimitDescriptor{{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "tenant", Value: "acme"}}}}})
	if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatalf("a call after the cut: %v %v", resp, err)
	}
}

// A descriptor naming a tenant "other" is that tenant, under its
// stand-in, never the overflow row of the collector's live view.
func TestDescriptorTenantNamedOther(t *testing.T) {
	d, err := parseDescriptor(&rlcommon.RateLimitDescriptor{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: KeyTenant, Value: tenant.Other}}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := tenant.Escape(tenant.Other); d.tags.Tenant != want || want == tenant.Other {
		t.Errorf("tenant %q, want %q", d.tags.Tenant, want)
	}
}
