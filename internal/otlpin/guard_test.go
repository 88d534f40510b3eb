package otlpin

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcgzip "google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/qtop-dev/qtop/report"
)

// payloads counts the messages a gRPC server read (stats.InPayload).
type payloads struct{ n atomic.Int64 }

func (p *payloads) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (p *payloads) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (p *payloads) HandleConn(context.Context, stats.ConnStats) {}
func (p *payloads) HandleRPC(_ context.Context, s stats.RPCStats) {
	if _, ok := s.(*stats.InPayload); ok {
		p.n.Add(1)
	}
}

// A wrong credential is refused from the stream's headers: the message
// (8 MiB here) is never read, the refusal is held back, nothing is
// reserved.
func TestGRPCCredentialBeforeMessage(t *testing.T) {
	clk := &fakeClock{now: t0}
	var held atomic.Int64
	r := newTestReceiver(t, &sink{}, clk, WithAuth(func(a string) bool { return a == "Bearer k" }),
		WithRefusalHold(func(context.Context) bool { held.Add(1); return true }))
	read := &payloads{}
	gs := grpc.NewServer(append(r.GRPCServerOptions(), grpc.StatsHandler(read))...)
	r.RegisterGRPC(gs)
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
	big := make(rawRequest, 8<<20)
	big[0] = 0x0a // a field 1 of the length that follows, unread anyway
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer wrong")
	var out coltracepb.ExportTraceServiceResponse
	err = cc.Invoke(ctx, exportMethod, big, &out, grpc.ForceCodec(rawCodec{}))
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("wrong token: %v", err)
	}
	if n := read.n.Load(); n != 0 {
		t.Errorf("%d messages read for a refused stream", n)
	}
	if held.Load() != 1 || r.mem.reserved() != 0 {
		t.Errorf("held %d, reserved %d", held.Load(), r.mem.reserved())
	}
	authed := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer k")
	if _, err := coltracepb.NewTraceServiceClient(cc).Export(authed, request("svc", server(1, "acme", "/a", time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	if n := read.n.Load(); n != 1 {
		t.Errorf("%d messages read, want 1", n)
	}
}

func tapCtx(addr string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	return peer.NewContext(ctx, &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: len(addr)}}), cancel
}

// Each admitted stream reserves the decoded limit before its message is
// read; a connection gets at most half the budget, the budget is never
// exceeded, and a stream's end gives its share back.
func TestGRPCMemoryBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const dec = 1 << 20
		r, err := New(&sink{}, WithMaxBody(dec/2, dec/2), WithMemory(4*dec)) // a stream reserves dec
		if err != nil {
			t.Fatal(err)
		}
		defer r.Shutdown(context.Background())
		info := &tap.Info{FullMethodName: exportMethod}
		var cancels []context.CancelFunc
		admit := func(conn string) error {
			ctx, cancel := tapCtx(conn)
			cancels = append(cancels, cancel)
			_, err := r.tapGRPC(ctx, info)
			return err
		}
		steps := []struct {
			conn string
			ok   bool
		}{{"a", true}, {"a", true}, {"a", false}, {"bb", true}, {"bb", true}, {"ccc", false}}
		for i, s := range steps {
			if err := admit(s.conn); (err == nil) != s.ok {
				t.Fatalf("step %d (%s): %v", i, s.conn, err)
			} else if err != nil && status.Code(err) != codes.Unavailable {
				t.Fatalf("step %d: %v, want UNAVAILABLE", i, err)
			}
		}
		if got := r.mem.reserved(); got != 4*dec {
			t.Fatalf("reserved %d", got)
		}
		cancels[0]() // the first stream ends
		synctest.Wait()
		if got := r.mem.reserved(); got != 3*dec {
			t.Fatalf("reserved %d after a stream ended", got)
		}
		if err := admit("ccc"); err != nil {
			t.Fatal(err)
		}
		// The read timeout ends a stream whose message does not arrive.
		ctx, cancel := tapCtx("dddd")
		defer cancel()
		cancels[1]()
		synctest.Wait()
		sctx, err := r.tapGRPC(ctx, info)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(DefaultGRPCReadTimeout - time.Nanosecond) // fake time: the bubble's clock
		synctest.Wait()
		// The refusal of "ccc", alone on its connection, waited reserveWait
		// for memory to be given back (that of "a", beside another stream
		// of its connection, did not wait), so "ccc" and "dddd" came
		// reserveWait after the "bb" streams, whose read timeout has
		// passed: only they remain.
		if sctx.Err() != nil || r.mem.reserved() != 2*dec {
			t.Fatalf("before the read timeout: %v, reserved %d", sctx.Err(), r.mem.reserved())
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		// Every stream admitted so far has had its read timeout: none
		// holds memory any more.
		if sctx.Err() == nil || r.mem.reserved() != 0 {
			t.Fatalf("after the read timeout: %v, reserved %d", sctx.Err(), r.mem.reserved())
		}
		for _, c := range cancels {
			c()
		}
	})
}

// A gzip message reaches the handler as sent and is decompressed there,
// within meter.MaxExpansion times the bytes received, once its stream
// holds the memory it may expand to: a bomb is INVALID_ARGUMENT, a normal
// message is taken, and the memory comes back with the answers.
func TestGRPCGzipBound(t *testing.T) {
	// No rate watch: the client compresses 20 MiB before its first byte,
	// which on a loaded machine takes longer than the grace.
	r := newTestReceiver(t, &sink{}, &fakeClock{now: t0}, WithMinRate(DefaultMinRate, time.Hour))
	cc, err := grpc.NewClient(serveGRPC(t, r), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.UseCompressor(grpcgzip.Name)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := coltracepb.NewTraceServiceClient(cc)
	if _, err := client.Export(t.Context(), request("svc", server(1, "acme", "/a", time.Millisecond))); err != nil {
		t.Fatalf("normal: %v", err)
	}
	bomb := request("svc", server(2, strings.Repeat("x", 20<<20), "/a", time.Millisecond)) // ~20 KiB gzip
	if _, err := client.Export(t.Context(), bomb); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "64 times") {
		t.Fatalf("bomb: %v, want INVALID_ARGUMENT, more than 64 times", err)
	}
	for result, n := range map[string]float64{reqOK: 1, reqTooLarge: 1} {
		if got := testutil.ToFloat64(r.met.requests.WithLabelValues("grpc", result)); got != n {
			t.Errorf("%s: %v, want %v", result, got, n)
		}
	}
	if got := r.mem.reserved(); got != 0 {
		t.Errorf("reserved %d after the answers", got)
	}
}

// A stream's headers are bounded at grpcMaxHeaders, which the server
// advertises (gRPC's own default is 16 MiB, buffered before the tap):
// a header list over it never reaches the receiver.
func TestGRPCHeadersBounded(t *testing.T) {
	r := newTestReceiver(t, &sink{}, &fakeClock{now: t0})
	cc, err := grpc.NewClient(serveGRPC(t, r), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := coltracepb.NewTraceServiceClient(cc)
	export := func(header int) error {
		ctx := metadata.AppendToOutgoingContext(t.Context(), "x-pad", strings.Repeat("p", header))
		_, err := client.Export(ctx, request("svc", server(1, "acme", "/a", time.Millisecond)))
		return err
	}
	if err := export(4 << 10); err != nil {
		t.Fatalf("4 KiB of headers: %v", err)
	}
	if err := export(grpcMaxHeaders); err == nil {
		t.Fatal("headers over the bound were taken")
	}
	if got := testutil.ToFloat64(r.met.requests.WithLabelValues("grpc", reqOK)); got != 1 {
		t.Errorf("ok %v, want 1", got)
	}
}

// An HTTP body sent below the minimum rate is cut (408, connection
// closed) and gives back its memory; meanwhile a normal client is served,
// as the slow one holds no decode slot.
func TestHTTPSlowSenderCut(t *testing.T) {
	clk := &fakeClock{now: t0}
	r := newTestReceiver(t, &sink{}, clk, WithMaxBody(1<<20, 1<<20), WithMemory(2<<20),
		WithMinRate(1<<20, 50*time.Millisecond), WithInflight(1))
	srv := httptest.NewServer(r)
	defer srv.Close()
	pr, pw := io.Pipe()
	defer pw.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+PathTraces, pr)
	req.Header.Set("Content-Type", ContentTypeProtobuf)
	req.ContentLength = 1 << 20
	type answer struct {
		code int
		err  error
	}
	slow := make(chan answer, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			slow <- answer{0, err}
			return
		}
		resp.Body.Close()
		slow <- answer{resp.StatusCode, nil}
	}()
	go pw.Write([]byte{0x0a}) // one byte, then nothing
	good := marshal(t, request("svc", server(1, "acme", "/a", time.Millisecond)))
	resp, err := http.Post(srv.URL+PathTraces, ContentTypeProtobuf, bytes.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("normal client beside a slow one: %d", resp.StatusCode)
	}
	a := <-slow
	if a.err == nil && a.code != http.StatusRequestTimeout {
		t.Fatalf("slow sender: %d", a.code)
	}
	srv.Close() // waits for the handlers
	if r.mem.reserved() != 0 {
		t.Fatalf("reserved %d", r.mem.reserved())
	}
}

// The memory of an HTTP body is reserved before it is read; a request
// that does not fit is answered 503 without being read.
func TestHTTPMemoryBudget(t *testing.T) {
	clk := &fakeClock{now: t0}
	r := newTestReceiver(t, &sink{}, clk, WithMaxBody(1<<20, 4<<20), WithMemory(8<<20))
	free, err := r.mem.reserveConnWait(t.Context(), "", 8<<20-32<<10, 0) // requests being received; a gzip body may take 64 KiB
	if err != nil {
		t.Fatal(err)
	}
	body := marshal(t, request("svc", server(1, "acme", "/a", time.Millisecond)))
	if w := post(t, r, ContentTypeProtobuf, "gzip", gz(body)); w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("gzip body that may expand beyond the free memory: %d", w.Code)
	}
	if w := post(t, r, ContentTypeProtobuf, "", body); w.Code != http.StatusOK {
		t.Fatalf("small body: %d %s", w.Code, w.Body)
	}
	free()
	if w := post(t, r, ContentTypeProtobuf, "gzip", gz(body)); w.Code != http.StatusOK {
		t.Fatalf("gzip body: %d %s", w.Code, w.Body)
	}
}

// A gzip bomb stops at meter.MaxExpansion times the bytes sent, and the
// refusal is held back.
func TestHTTPGzipBombHeld(t *testing.T) {
	clk := &fakeClock{now: t0}
	var mu sync.Mutex
	var held []string
	r := newTestReceiver(t, &sink{}, clk, WithAuth(func(a string) bool { return a == "Bearer k" }),
		WithRefusalHold(func(ctx context.Context) bool { mu.Lock(); held = append(held, "x"); mu.Unlock(); return len(held) < 3 }))
	bomb := gz(make([]byte, 32<<20))
	w := post(t, r, ContentTypeProtobuf, "gzip", bomb, "Authorization", "Bearer k")
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "64 times") {
		t.Fatalf("bomb: %d %s", w.Code, w.Body)
	}
	if w := post(t, r, ContentTypeProtobuf, "", nil, "Authorization", "Bearer no"); w.Code != http.StatusUnauthorized || w.Header().Get("Connection") != "" {
		t.Fatalf("wrong token: %d", w.Code)
	}
	// The third refusal finds no place to be held: answered at once, its
	// connection closed.
	if w := post(t, r, "text/plain", "", nil); w.Code != http.StatusUnsupportedMediaType {
		t.Fatalf("media type: %d", w.Code)
	}
	if w := post(t, r, ContentTypeProtobuf, "br", nil, "Authorization", "Bearer k"); w.Code != http.StatusUnsupportedMediaType || w.Header().Get("Connection") != "close" {
		t.Fatalf("encoding: %d %v", w.Code, w.Header())
	}
	if len(held) != 4 {
		t.Fatalf("held %d refusals, want 4", len(held))
	}
	if report.MaxExpansion != 64 {
		t.Fatal("the messages above name 64 times")
	}
}

// A refusal is held with nothing of the request kept: no reservation, no
// decode slot (a client posting junk in a loop with a valid token never
// holds what others need while its answer waits).
func TestHTTPRefusalHeldWithNothingKept(t *testing.T) {
	clk := &fakeClock{now: t0}
	var r *Receiver
	var during []string
	r = newTestReceiver(t, &sink{}, clk, WithRefusalHold(func(context.Context) bool {
		during = append(during, fmt.Sprintf("reserved %d, slots %d", r.mem.reserved(), len(r.sem)))
		return true
	}))
	for _, body := range [][]byte{{0x0a, 0xff}, gz([]byte{0x0a, 0xff})} {
		enc := ""
		if body[0] == 0x1f {
			enc = "gzip"
		}
		if w := post(t, r, ContentTypeProtobuf, enc, body); w.Code != http.StatusBadRequest {
			t.Fatalf("malformed: %d", w.Code)
		}
	}
	if len(during) != 2 || during[0] != "reserved 0, slots 0" || during[1] != "reserved 0, slots 0" {
		t.Fatalf("while held: %q", during)
	}
}

// A stream that finds its connection's share taken waits up to
// reserveWait for a release (the previous stream's memory comes back just
// after its answer) before it is answered busy.
func TestGRPCReserveWaitsForRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newMemBudget(4)
		r1, err := b.reserveConnWait(t.Context(), "a", 2, 0)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := b.reserveConnWait(t.Context(), "a", 2, reserveWait)
			done <- err
		}()
		synctest.Wait() // waiting: the share of "a" is taken
		select {
		case err := <-done:
			t.Fatalf("did not wait: %v", err)
		default:
		}
		time.Sleep(reserveWait / 2)
		r1() // the first stream's memory comes back
		if err := <-done; err != nil {
			t.Fatalf("after the release: %v", err)
		}
		start := time.Now()
		if _, err := b.reserveConnWait(t.Context(), "a", 2, reserveWait); err == nil {
			t.Fatal("admitted beyond the connection's share")
		} else if waited := time.Since(start); waited != reserveWait {
			t.Fatalf("waited %v, want %v", waited, reserveWait)
		}
	})
}

// A gzip body cut off in transit ends in bytes of its stream, read as
// the trailer: where they give a size over the limit, it is refused
// unread (413) and the message says what the trailer gave and that a
// cut-off body reads this way; else decompressing it fails (400). No cut
// of a body is taken.
func TestGzipCutOff(t *testing.T) {
	var spans []spanSpec
	for i := range 20 {
		spans = append(spans, server(uint64(i+1), "acme", "/a", time.Millisecond))
	}
	z := gz(marshal(t, request("svc", spans...)))
	const maxDecoded = 16 << 20
	tooLarge := 0
	for n := 18; n < len(z); n++ {
		cut := z[:n]
		limit := expansionLimit(int64(n), maxDecoded)
		claim := int64(binary.LittleEndian.Uint32(cut[n-4:]))
		var buf bytes.Buffer
		err := gunzip(&buf, cut, limit, maxDecoded)
		if claim > limit {
			tooLarge++
			if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), fmt.Sprintf("trailer gives %d bytes", claim)) || !strings.Contains(err.Error(), "cut-off body") {
				t.Fatalf("cut at %d of %d, trailer %d: %v", n, len(z), claim, err)
			}
		} else if !errors.Is(err, ErrMalformed) {
			t.Fatalf("cut at %d of %d, trailer %d: %v, want it malformed", n, len(z), claim, err)
		}
	}
	if tooLarge == 0 {
		t.Fatal("no cut read as too large: nothing of the message was checked")
	}
	r := newTestReceiver(t, &sink{}, &fakeClock{now: t0})
	cut := z[:len(z)-1]
	w := post(t, r, ContentTypeProtobuf, "gzip", cut)
	claim := binary.LittleEndian.Uint32(cut[len(cut)-4:])
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), fmt.Sprintf("trailer gives %d bytes", claim)) {
		t.Fatalf("a body one byte short: %d %s", w.Code, w.Body)
	}
}

// A body sent as gzip that is not gzip at all is malformed (400), not
// refused as too large by what its last bytes would say as a trailer.
func TestGzipNotGzip(t *testing.T) {
	r := newTestReceiver(t, &sink{}, &fakeClock{now: t0})
	body := []byte(`{"resourceSpans":[{"resource":{"attributes":[]},"scopeSpans":[]}]}` + strings.Repeat(" ", 100))
	w := post(t, r, ContentTypeJSON, "gzip", body)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "gzip: invalid header") {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

// An HTTP body's memory is reserved as its bytes arrive, not from the
// length it declares: requests that declare 1 MiB (or nothing: chunked)
// and send one byte hold bodyStep each, so a normal export beside them is
// taken where the first of them used to hold the whole budget; a body
// that grows past the free memory is answered busy after reserveWait, and
// everything is given back. Fake time (the waits are exact).
func TestHTTPMemoryFollowsBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := New(&sink{}, WithInterval(time.Hour), WithMaxBody(1<<20, 4<<20), WithGRPCMaxMessage(128<<10), WithMemory(1<<20))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Shutdown(context.Background())
		type open struct {
			pw   *io.PipeWriter
			code chan int
		}
		start := func(enc string, declared int64) open {
			pr, pw := io.Pipe()
			req := httptest.NewRequest(http.MethodPost, PathTraces, pr)
			req.Header.Set("Content-Type", ContentTypeProtobuf)
			req.Header.Set("Content-Encoding", enc)
			req.ContentLength = declared
			o := open{pw, make(chan int, 1)}
			go func() {
				w := httptest.NewRecorder()
				r.ServeHTTP(w, req)
				o.code <- w.Code
			}()
			return o
		}
		var idle []open
		for _, c := range []struct {
			enc      string
			declared int64
		}{{"", 1 << 20}, {"gzip", 1 << 20}, {"", -1}, {"gzip", -1}} {
			o := start(c.enc, c.declared)
			go o.pw.Write([]byte{0x0a}) // one byte, then nothing
			idle = append(idle, o)
		}
		synctest.Wait()
		if got := r.mem.reserved(); got != 4*bodyStep {
			t.Fatalf("four requests that sent a byte each hold %d, want %d", got, 4*bodyStep)
		}
		body := marshal(t, request("svc", server(1, "acme", "/a", time.Millisecond)))
		if w := post(t, r, ContentTypeProtobuf, "", body); w.Code != http.StatusOK {
			t.Fatalf("an export beside them: %d %s", w.Code, w.Body)
		}
		// A body that keeps coming doubles its reservation as it arrives.
		grow := start("", 1<<20)
		grow.pw.Write(make([]byte, bodyStep+1))
		synctest.Wait()
		if got := r.mem.reserved(); got != 4*bodyStep+2*bodyStep {
			t.Fatalf("after %d bytes: %d reserved, want %d", bodyStep+1, got, 6*bodyStep)
		}
		// Until the budget has no room: busy after waiting reserveWait.
		t0 := time.Now()
		written := make(chan struct{})
		go func() {
			grow.pw.Write(make([]byte, 1<<20-bodyStep-2))
			close(written)
		}()
		if c := <-grow.code; c != http.StatusServiceUnavailable || time.Since(t0) != reserveWait {
			t.Fatalf("body past the free memory: %d after %v, want 503 after %v", c, time.Since(t0), reserveWait)
		}
		grow.pw.CloseWithError(io.ErrClosedPipe) // the writer gives up
		<-written
		for _, o := range idle {
			o.pw.Close()
			if c := <-o.code; c != http.StatusBadRequest {
				t.Fatalf("a body cut after one byte: %d", c)
			}
		}
		if got := r.mem.reserved(); got != 0 {
			t.Fatalf("%d still reserved", got)
		}
	})
}
