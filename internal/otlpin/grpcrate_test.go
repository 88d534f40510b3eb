package otlpin

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// An admitted stream's message must arrive at the minimum rate after the
// grace, counted on its connection and shared among the connection's
// streams that wait for theirs (a chunk in time keeps one stream, not
// every stream of the connection); a slower one is cut and its memory
// given back. A metered stream holds grpcStep until its message is in
// (its connection's reads would grow it: TestGRPCPool). Fake time: the
// bubble's clock.
func TestGRPCRateWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const dec = 1 << 20
		r, err := New(&sink{}, WithMaxBody(dec/2, dec/2), WithMemory(16*dec)) // a stream reserves dec
		if err != nil {
			t.Fatal(err)
		}
		defer r.Shutdown(context.Background())
		slow := func() float64 { return testutil.ToFloat64(r.met.requests.WithLabelValues("grpc", reqSlow)) }
		meter := func(conn string) *connMeter { return meterConn(r, conn) }
		admit := func(conn string) context.Context { return admitStream(t, r, conn) }
		// first is when the first chunk is due: the grace, then rateChunk
		// bytes at the minimum rate.
		first := DefaultRateGrace + time.Duration(rateChunk)*time.Second/DefaultMinRate
		step := time.Duration(rateChunk) * time.Second / DefaultMinRate

		// A stream that sends nothing is cut when the first chunk is late.
		meter("a")
		idle := admit("a")
		time.Sleep(first - time.Nanosecond)
		synctest.Wait()
		if idle.Err() != nil || r.mem.reserved() != grpcStep {
			t.Fatalf("before the first chunk is due: %v, reserved %d", idle.Err(), r.mem.reserved())
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if idle.Err() == nil || r.mem.reserved() != 0 || slow() != 1 {
			t.Fatalf("idle stream: %v, reserved %d, slow %v", idle.Err(), r.mem.reserved(), slow())
		}

		// One stream whose connection delivers a chunk in time is kept; the
		// next chunk is due a step later, and it is cut when that one does
		// not come.
		bb := meter("bb")
		one := admit("bb")
		time.Sleep(first - time.Millisecond)
		bb.read.Add(rateChunk)
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if one.Err() != nil {
			t.Fatalf("a stream on time was cut: %v", context.Cause(one))
		}
		time.Sleep(step - time.Nanosecond)
		synctest.Wait()
		if one.Err() != nil {
			t.Fatalf("cut before its second chunk was due: %v", context.Cause(one))
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if one.Err() == nil || slow() != 2 || bb.waiting.Load() != 0 {
			t.Fatalf("second chunk late: %v, slow %v, waiting %d", one.Err(), slow(), bb.waiting.Load())
		}

		// Two streams of one connection share what it delivers: one chunk
		// in time keeps one of them, not both.
		ccc := meter("ccc")
		two := []context.Context{admit("ccc"), admit("ccc")}
		time.Sleep(first - time.Millisecond)
		ccc.read.Add(rateChunk)
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if (two[0].Err() == nil) == (two[1].Err() == nil) || slow() != 3 || r.mem.reserved() != 2*grpcStep {
			t.Fatalf("sharing one chunk: %v %v, slow %v, reserved %d", two[0].Err(), two[1].Err(), slow(), r.mem.reserved())
		}
		time.Sleep(step)
		synctest.Wait()
		if two[0].Err() == nil || two[1].Err() == nil || slow() != 4 || r.mem.reserved() != 0 {
			t.Fatalf("a step later: %v %v, slow %v, reserved %d", two[0].Err(), two[1].Err(), slow(), r.mem.reserved())
		}

		// A stream whose message is in is no longer watched, and holds
		// twice its message; its end gives that back.
		dddd := meter("dddd")
		in := admit("dddd")
		streamReceived(in, 1000)
		if dddd.waiting.Load() != 0 {
			t.Fatalf("waiting %d after the message came", dddd.waiting.Load())
		}
		time.Sleep(10 * first)
		synctest.Wait()
		if in.Err() != nil || slow() != 4 || r.mem.reserved() != 2000 {
			t.Fatalf("received: %v, slow %v, reserved %d", in.Err(), slow(), r.mem.reserved())
		}
		releaseStream(in)
		if r.mem.reserved() != 0 {
			t.Fatalf("reserved %d after the stream's end", r.mem.reserved())
		}

		// A connection the receiver does not meter has only the read
		// timeout, which counts as slow too.
		bare := admit("eeeee")
		time.Sleep(DefaultGRPCReadTimeout - time.Nanosecond)
		synctest.Wait()
		if bare.Err() != nil {
			t.Fatalf("unmetered stream cut before the read timeout: %v", context.Cause(bare))
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if bare.Err() == nil || slow() != 5 || r.mem.reserved() != 0 {
			t.Fatalf("read timeout: %v, slow %v, reserved %d", bare.Err(), slow(), r.mem.reserved())
		}
	})
}

// Streams that send their headers and nothing else, enough to hold the
// whole memory budget, are cut once their first chunk is late, over a
// real gRPC server on GRPCListener, and exporters are served again
// (before, every exporter was answered busy for the 30 s read timeout).
func TestGRPCIdleStreamsCut(t *testing.T) {
	const dec = 1 << 20
	r := newTestReceiver(t, &sink{}, &fakeClock{now: t0}, WithMaxBody(dec/2, dec/2), WithMemory(4*dec),
		WithMinRate(DefaultMinRate, 0))
	addr := serveGRPC(t, r)
	var idle []grpc.ClientStream
	for range 2 { // two connections of two streams: half the budget each
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		for range 2 {
			s, err := cc.NewStream(t.Context(), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, exportMethod)
			if err != nil {
				t.Fatal(err)
			}
			idle = append(idle, s)
		}
	}
	for i, s := range idle {
		var out coltracepb.ExportTraceServiceResponse
		if err := s.RecvMsg(&out); status.Code(err) != codes.Canceled {
			t.Fatalf("idle stream %d: %v, want CANCELLED (cut)", i, err)
		}
	}
	if got := testutil.ToFloat64(r.met.requests.WithLabelValues("grpc", reqSlow)); got != 4 {
		t.Errorf("slow %v, want 4", got)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := coltracepb.NewTraceServiceClient(cc).Export(t.Context(), request("svc", server(1, "acme", "/a", time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	if r.mem.reserved() != 0 {
		t.Errorf("reserved %d after every stream ended", r.mem.reserved())
	}
}
