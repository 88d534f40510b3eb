package otlpin

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// A metered connection's pool follows the bytes its waiting streams sent:
// a step each when admitted, twice what arrived (doubling) before gRPC has
// it, at most twice the message limit a stream; a message that is in moves
// twice its size to its stream; a read whose growth finds the budget taken
// waits up to reserveWait, then cuts the connection's waiting streams
// (busy) and gives their pool back. Fake time: the bubble's clock.
func TestGRPCPool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const dec = 1 << 20
		r, err := New(&sink{}, WithMaxBody(dec/2, dec/2), WithMemory(2*dec)) // a stream holds at most dec
		if err != nil {
			t.Fatal(err)
		}
		defer r.Shutdown(context.Background())
		meter := func(conn string) *connMeter { return meterConn(r, conn) }
		admit := func(conn string) context.Context { return admitStream(t, r, conn) }
		want := func(what string, n int64) {
			t.Helper()
			if got := r.mem.reserved(); got != n {
				t.Fatalf("%s: reserved %d, want %d", what, got, n)
			}
		}

		// Growth: a step, then twice what arrived, doubling.
		a := meter("a")
		sa := admit("a")
		want("admitted", grpcStep)
		a.grow(grpcStep / 2) // twice it is the step: no growth
		want("half a step read", grpcStep)
		a.grow(grpcStep / 4) // 2 × 3/4 step: doubles
		want("three quarters read", 2*grpcStep)
		a.grow(dec) // beyond what one message may hold: its most
		want("more than a message", dec)
		streamReceived(sa, 1000) // twice the message moves to the stream; the rest goes back
		want("received", 2000)
		releaseStream(sa)
		want("answered", 0)
		a.grow(dec) // nobody waits: nothing to grow
		want("read with no stream waiting", 0)

		// A message gzip expanded beyond what its bytes reserved takes
		// the rest from the budget, or is refused busy.
		sg := admit("a")
		a.grow(1000)
		if err := streamReceived(sg, 200<<10); err != nil {
			t.Fatal(err)
		}
		want("expanded", 400<<10)
		releaseStream(sg)
		sg = admit("a")
		if err := streamReceived(sg, dec+1); !errors.Is(err, ErrBusy) { // 2 dec + 2: over the budget
			t.Fatalf("a message whose memory does not fit: %v, want busy", err)
		}
		want("refused", grpcStep) // its step stays with the stream until it is answered
		releaseStream(sg)
		want("answered", 0)

		// A read whose growth does not fit waits, then cuts the
		// connection's waiting streams (busy) and gives their pool back;
		// the connection serves the next stream.
		b := meter("bb")
		sb := admit("bb")
		b.grow(dec) // b's pool: dec, half the budget (its connection's share)
		c := meter("ccc")
		sc1, sc2 := admit("ccc"), admit("ccc")
		want("b at its most, two of c", dec+2*grpcStep)
		grown := make(chan struct{})
		go func() { c.grow(3 * dec / 4); close(grown) }() // needs 1.5 dec: the budget has dec - 2 steps
		time.Sleep(reserveWait - time.Nanosecond)
		synctest.Wait()
		if sc1.Err() != nil || sc2.Err() != nil {
			t.Fatal("cut before reserveWait")
		}
		time.Sleep(time.Nanosecond)
		<-grown
		for i, s := range []context.Context{sc1, sc2} {
			if !errors.Is(context.Cause(s), errPoolCut) {
				t.Fatalf("stream %d of c: cause %v, want the pool's cut", i, context.Cause(s))
			}
		}
		want("c cut", dec)
		if sb.Err() != nil {
			t.Fatal("b's stream was cut with c's")
		}

		// A growth that waits is served when memory comes back in time.
		sc3 := admit("ccc")
		d := meter("dddd")
		sd := admit("dddd")
		d.grow(dec / 4) // d's pool: dec/2
		want("b, c's step, d", dec+grpcStep+dec/2)
		grown = make(chan struct{})
		go func() { c.grow(dec / 2); close(grown) }() // c's pool to dec: the budget has dec/2 - a step
		time.Sleep(reserveWait / 2)
		synctest.Wait()
		select {
		case <-grown:
			t.Fatal("grown beyond the budget")
		default:
		}
		releaseStream(sb) // b's dec back
		<-grown
		if sc3.Err() != nil {
			t.Fatalf("served in time, yet cut: %v", context.Cause(sc3))
		}
		want("c grown, d", dec+dec/2)
		releaseStream(sc3)
		releaseStream(sd)
		want("all answered", 0)
	})
}

// Streams that send their headers and nothing else hold a step each, not
// twice the message limit: twice as many as the old reservation let the
// budget hold are admitted beside exports on the same connections, small
// and large, which are served while they wait (before, the third stream
// of a connection was answered busy, and so was every export after it).
func TestGRPCIdleStreamsHoldAStep(t *testing.T) {
	const dec = 1 << 20
	r := newTestReceiver(t, &sink{}, &fakeClock{now: t0}, WithMaxBody(dec/2, dec/2), WithMemory(4*dec),
		WithMinRate(DefaultMinRate, time.Hour))
	addr := serveGRPC(t, r)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	large := request("svc", server(1, strings.Repeat("x", 200<<10), "/a", time.Millisecond)) // ~200 KiB
	for i := range 2 {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		for range 4 { // 4 × dec would be the whole budget, twice a connection's share
			if _, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, exportMethod); err != nil {
				t.Fatal(err)
			}
		}
		// Taken after the idle streams: the connection's reader taps in order.
		client := coltracepb.NewTraceServiceClient(cc)
		if _, err := client.Export(t.Context(), request("svc", server(1, "acme", "/a", time.Millisecond))); err != nil {
			t.Fatalf("connection %d, small export beside idle streams: %v", i, err)
		}
		if _, err := client.Export(t.Context(), large); err != nil {
			t.Fatalf("connection %d, large export beside idle streams: %v", i, err)
		}
	}
	if got := r.mem.reserved(); got >= dec {
		t.Errorf("eight idle streams hold %d bytes, want less than %d", got, dec)
	}
	if got := testutil.ToFloat64(r.met.requests.WithLabelValues("grpc", reqBusy)); got != 0 {
		t.Errorf("busy answers %v, want 0", got)
	}
}
