package collector

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/otlpin"
	"github.com/qtop-dev/qtop/report"
)

// crashWithLog leaves f's data dir as a collector killed mid-minute leaves
// it: acme's minute emitted once with 60 requests, then 7 more in the
// write-ahead log only. It returns the last report (acknowledged, so in the
// log) and the killed collector, whose data dir lock is still held.
func crashWithLog(t *testing.T, f *fixture) (last []byte, crashed *Server) {
	t.Helper()
	p := newProcess(f.clk, "api", "p1")
	for i := range 5 {
		f.clk.Add(time.Second)
		if f.ingest(p.report(t, "acme", 10+i, "")) != 200 {
			t.Fatal("refused")
		}
	}
	f.s.Tick(context.Background(), time.Date(2026, 3, 4, 9, 1, 10, 0, time.UTC))
	if got := f.mem.sum("acme", "", count); got != 60 {
		t.Fatalf("before the crash: %v", got)
	}
	f.clk.Set(time.Date(2026, 3, 4, 9, 1, 11, 0, time.UTC))
	last = p.report(t, "acme", 7, "") // late, acknowledged, then the crash
	if f.ingest(last) != 200 {
		t.Fatal("refused")
	}
	crashed = f.s
	t.Cleanup(func() { crashed.em.spool.Close() })
	return last, crashed
}

// startPaused starts f's collector with Config.ListenFirst and holds its
// replay after the first report until resume is closed. Start's result
// arrives on the returned channel.
func startPaused(t *testing.T, f *fixture, ctx context.Context) (started chan error, resume chan struct{}) {
	t.Helper()
	f.start(func(c *Config) {
		c.ListenFirst, c.Listen, c.Gatherer = true, "127.0.0.1:0", f.reg
		c.OTLPGRPC, c.RLSListen, c.RLS, c.Token = "127.0.0.1:0", "127.0.0.1:0", envoyRLS, "report-tok"
	})
	paused, resume := make(chan struct{}), make(chan struct{})
	f.s.boot.hook = func(n int64) {
		if n == 1 {
			close(paused)
			<-resume
		}
	}
	started = make(chan error, 1)
	go func() { started <- f.s.Start(ctx) }()
	<-paused
	return started, resume
}

func do(t *testing.T, method, url string, body []byte, token string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", report.ContentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// TestListenFirstReplay: with Config.ListenFirst a restarted collector
// answers /healthz while it replays its write-ahead log, says so on
// /readyz, refuses reports with 503 and Retry-After (the process keeps
// them) and OTLP/gRPC and rate-limit calls with Unavailable (after their
// credential), and once replayed takes them: the report refused during the
// replay, sent again, is a duplicate, and the minute is whole.
func TestListenFirstReplay(t *testing.T) {
	f := newFixture(t)
	last, crashed := crashWithLog(t, f)
	crashed.life.lock.Close() // as the kernel does when a process dies
	started, resume := startPaused(t, f, context.Background())
	base := "http://" + f.s.Addr()

	if resp, _ := do(t, "GET", base+"/healthz", nil, ""); resp.StatusCode != 200 {
		t.Fatalf("healthz during the replay: %d, want 200 (a liveness probe must not kill it)", resp.StatusCode)
	}
	if resp, body := do(t, "GET", base+"/readyz", nil, ""); resp.StatusCode != 503 || !strings.Contains(body, "replaying its write-ahead log") || !strings.Contains(body, " reports so far") {
		t.Fatalf("readyz during the replay: %d %s", resp.StatusCode, body)
	}
	resp, body := do(t, "POST", base+api.PathReports, last, "report-tok")
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "5" || !strings.Contains(body, "replaying") {
		t.Fatalf("a report during the replay: %d %q %s, want 503 with Retry-After 5", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if resp, _ := do(t, "GET", base+api.PathLive, nil, ""); resp.StatusCode != 503 {
		t.Fatalf("the live view during the replay: %d, want 503", resp.StatusCode)
	}
	if resp, _ := do(t, "GET", base+"/metrics", nil, ""); resp.StatusCode != 200 {
		t.Fatalf("metrics during the replay: %d, want 200", resp.StatusCode)
	}
	if _, err := f.s.Consume(context.Background(), &report.Report{}, nil); err == nil {
		t.Fatal("Consume during the replay took a report")
	} else if d, ok := report.IsRetryable(err); !ok || d != replayRetry {
		t.Fatalf("Consume during the replay: %v, want retryable after %v", err, replayRetry)
	}
	// OTLP/gRPC and the rate-limit service listen too, and answer
	// Unavailable saying why — after the credential, which comes first.
	cc, err := grpc.NewClient(f.s.OTLPGRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	traces := coltracepb.NewTraceServiceClient(cc)
	spans := otlpRequest("shop-grpc", 3, 1, f.clk.Now(), 100)
	authed := withBearer(t.Context(), "report-tok")
	_, err = traces.Export(authed, spans)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "replaying its write-ahead log") {
		t.Fatalf("an OTLP/gRPC export during the replay: %v, want Unavailable saying why", err)
	}
	// Refused before it is read, in the tap, with when to send it again.
	var retry time.Duration
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			retry = ri.RetryDelay.AsDuration()
		}
	}
	if retry != replayRetry {
		t.Fatalf("an OTLP/gRPC export during the replay: retry after %v, want %v", retry, replayRetry)
	}
	if _, err := traces.Export(withBearer(t.Context(), "nope"), spans); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("an OTLP/gRPC export with a wrong token during the replay: %v, want Unauthenticated", err)
	}
	pb, err := proto.Marshal(spans)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		token string
		code  int
		says  string
	}{{"nope", 401, "token"}, {"report-tok", 503, "replaying its write-ahead log"}} {
		req, _ := http.NewRequest("POST", base+otlpin.PathTraces, bytes.NewReader(pb))
		req.Header.Set("Content-Type", otlpin.ContentTypeProtobuf)
		req.Header.Set("Authorization", "Bearer "+c.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code || !strings.Contains(string(b), c.says) || (c.code == 503 && resp.Header.Get("Retry-After") != "5") {
			t.Fatalf("an OTLP/HTTP export with token %q during the replay: %d %q %s, want %d saying %q (503: Retry-After 5)",
				c.token, resp.StatusCode, resp.Header.Get("Retry-After"), b, c.code, c.says)
		}
	}
	// Both exports are counted as refused for now, not as busy: the
	// receiver had room.
	_, metrics := do(t, "GET", base+"/metrics", nil, "")
	for _, line := range []string{`qtop_otlp_requests_total{result="refused",transport="grpc"} 1`, `qtop_otlp_requests_total{result="refused",transport="http"} 1`} {
		if !strings.Contains(metrics, line+"\n") {
			t.Fatalf("metrics during the replay lack %s:\n%s", line, grepLines(metrics, "qtop_otlp_requests_total"))
		}
	}
	if strings.Contains(metrics, `result="busy"`) {
		t.Fatalf("exports refused during the replay counted as busy:\n%s", grepLines(metrics, "qtop_otlp_requests_total"))
	}
	rls := rlsClient(t, f.s.RLSAddr(), insecure.NewCredentials())
	if _, err := rls.ShouldRateLimit(authed, rlsRequest(0, "tenant", "acme")); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "replaying") {
		t.Fatalf("a rate-limit call during the replay: %v, want Unavailable saying why", err)
	}
	if _, err := rls.ShouldRateLimit(withBearer(t.Context(), "nope"), rlsRequest(0, "tenant", "acme")); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a rate-limit call with a wrong token during the replay: %v, want Unauthenticated", err)
	}
	// Refused in the service's tap, before it was read: no answer made.
	_, metrics = do(t, "GET", base+"/metrics", nil, "")
	for _, line := range []string{`qtop_rls_requests_total{code="refused"} 1`, `qtop_rls_requests_total{code="unauthenticated"} 1`, `qtop_rls_answer_seconds_count 0`} {
		if !strings.Contains(metrics, line+"\n") {
			t.Fatalf("metrics during the replay lack %s:\n%s", line, grepLines(metrics, "qtop_rls_"))
		}
	}

	close(resume)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if resp, body := do(t, "GET", base+"/readyz", nil, ""); resp.StatusCode != 200 {
		t.Fatalf("readyz after the replay: %d %s", resp.StatusCode, body)
	}
	if _, err := traces.Export(authed, spans); err != nil {
		t.Fatalf("an OTLP/gRPC export after the replay: %v", err)
	}
	if resp, err := rls.ShouldRateLimit(authed, rlsRequest(0, "tenant", "acme")); err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatalf("a rate-limit call after the replay: %v %v", resp, err)
	}
	if resp, body := do(t, "POST", base+api.PathReports, last, "report-tok"); resp.StatusCode != 200 || testutil.ToFloat64(f.s.met.duplicates) != 1 {
		t.Fatalf("the report sent again after the replay: %d %s, duplicates %v (want 200, a duplicate)", resp.StatusCode, body, testutil.ToFloat64(f.s.met.duplicates))
	}
	f.stop()
	if got := f.mem.sum("acme", "", count); got != 67 {
		t.Fatalf("after the replay: count %v, want 67 (nothing lost, nothing doubled)", got)
	}
}

// TestListenFirstStoppedMidReplay: a collector stopped during its replay
// writes no minute (it holds part of one) and keeps the log, which the
// next start replays in full.
func TestListenFirstStoppedMidReplay(t *testing.T) {
	f := newFixture(t)
	_, crashed := crashWithLog(t, f)
	crashed.life.lock.Close()
	ctx, cancel := context.WithCancel(context.Background())
	started, resume := startPaused(t, f, ctx)
	cancel()
	close(resume)
	if err := <-started; err != nil {
		t.Fatalf("Start stopped mid-replay: %v, want nil (a stop is not a failure)", err)
	}
	f.stop()
	if got := f.mem.sum("acme", "", count); got != 60 {
		t.Fatalf("after a stop mid-replay: count %v, want 60 (no part of the minute written)", got)
	}
	f.start()
	defer f.stop()
	f.s.Tick(context.Background(), f.clk.Add(time.Second))
	if got := f.mem.sum("acme", "", count); got != 67 {
		t.Fatalf("after the next start: count %v, want 67", got)
	}
}

// grepLines is the lines of text that contain sub, for a failure message.
func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
