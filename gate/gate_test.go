package gate_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/net/websocket"

	"github.com/qtop-dev/qtop/agent"
	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/enforce"
	"github.com/qtop-dev/qtop/gate"
	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/policy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// started is a gate serving on a loopback port.
type started struct {
	g    *gate.Gate
	base string
	errc chan error
}

// start runs a gate in front of upstream with the agent options given
// (tenant from X-Tenant/X-Tier, no collector unless given).
func start(t *testing.T, upstream string, cfg gate.Config, opts ...agent.Option) *started {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Upstream = u
	a, err := agent.New(append([]agent.Option{agent.WithService("gated"), agent.WithTenant(agent.FromHeader("X-Tenant", "X-Tier"))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gate.New(a, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &started{g: g, base: "http://" + ln.Addr().String(), errc: make(chan error, 1)}
	go func() { s.errc <- g.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		g.Shutdown(ctx)
		<-s.errc
	})
	return s
}

func get(t *testing.T, c *http.Client, url, tn string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("X-Tenant", tn)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestForwardsWithTenantAndForwardedHeaders(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.URL.Path+"|"+r.Header.Get("Baggage")+"|"+r.Header.Get("X-Forwarded-Host")+"|"+
			r.Header.Get("X-Forwarded-Proto")+"|"+r.Header.Get("X-Forwarded-For")+"|"+r.Header.Get("X-Hop")+r.Header.Get("X-Real-Ip"))
	}))
	defer up.Close()
	s := start(t, up.URL, gate.Config{})
	req, _ := http.NewRequest(http.MethodGet, s.base+"/orders/7", nil)
	req.Header.Set("X-Tenant", "acme")
	req.Header.Set("X-Tier", "T1")
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "dropped")
	req.Header.Set("X-Real-IP", "6.6.6.6") // the client's word, as X-Forwarded-For would be
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	host := strings.TrimPrefix(s.base, "http://")
	want := "/orders/7|tenant.id=acme,tenant.tier=T1|" + host + "|http|127.0.0.1|"
	if resp.StatusCode != 200 || !sameBaggage(string(b), want) {
		t.Fatalf("upstream saw %q (%d), want %q", b, resp.StatusCode, want)
	}
	// No tenant: refused by the agent, never forwarded.
	resp, body := get(t, http.DefaultClient, s.base+"/orders/7", "")
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("no tenant: %d %q", resp.StatusCode, body)
	}
}

// sameBaggage compares got and want with baggage members in any order.
func sameBaggage(got, want string) bool {
	g, w := strings.Split(got, "|"), strings.Split(want, "|")
	if len(g) != len(w) {
		return false
	}
	norm := func(s string) string {
		m := strings.Split(s, ",")
		if len(m) == 2 && m[0] > m[1] {
			m[0], m[1] = m[1], m[0]
		}
		return strings.Join(m, ",")
	}
	g[1], w[1] = norm(g[1]), norm(w[1])
	return strings.Join(g, "|") == strings.Join(w, "|")
}

// TestEventStreamUnbuffered: the client reads the first event while the
// upstream is still holding the stream open.
func TestEventStreamUnbuffered(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/events" {
			io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "data: two\n\n")
	}))
	defer up.Close()
	// One admission slot: the open stream gives it back, so the next
	// request is served meanwhile.
	s := start(t, up.URL, gate.Config{}, agent.WithSlots(1))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/events", nil)
	req.Header.Set("X-Tenant", "acme")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "data: one\n" {
		t.Fatalf("first event before the upstream finished: %q %v", line, err)
	}
	if resp, body := get(t, http.DefaultClient, s.base+"/other", "acme"); resp.StatusCode != 200 {
		close(release)
		t.Fatalf("a request beside the open stream: %d %q", resp.StatusCode, body)
	}
	close(release)
	rest, _ := io.ReadAll(br)
	if string(rest) != "\ndata: two\n\n" {
		t.Fatalf("rest %q", rest)
	}
}

// TestWebSocketUpgrade: a WebSocket passes both ways, with an h2c
// upstream too, where the upgrade goes over HTTP/1.1 (HTTP/2 has no
// Upgrade; before, it was answered 502).
func TestWebSocketUpgrade(t *testing.T) {
	up := httptest.NewUnstartedServer(websocket.Handler(func(c *websocket.Conn) { io.Copy(c, c) }))
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	up.Config.Protocols = &p
	up.Start()
	defer up.Close()
	for _, h2c := range []bool{false, true} {
		s := start(t, up.URL, gate.Config{H2CUpstream: h2c})
		cfg, err := websocket.NewConfig("ws"+strings.TrimPrefix(s.base, "http")+"/ws", "http://localhost/")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Header.Set("X-Tenant", "acme")
		c, err := websocket.DialConfig(cfg)
		if err != nil {
			t.Fatalf("h2c upstream %v: %v", h2c, err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("h2c upstream %v: echo %q %v", h2c, buf, err)
		}
	}
}

func TestUpstreamDownIs502(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := start(t, "http://"+addr, gate.Config{})
	resp, body := get(t, http.DefaultClient, s.base+"/x", "acme")
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "could not be reached") {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
}

func TestUpstreamTooSlowIs504(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // answers only when the gate gives up
	}))
	defer up.Close()
	s := start(t, up.URL, gate.Config{Timeout: 50 * time.Millisecond})
	resp, body := get(t, http.DefaultClient, s.base+"/slow", "acme")
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(body, "did not answer within 50ms") {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
}

// TestDrainOnShutdown: Shutdown stops accepting at once, lets the request
// in flight finish with the upstream's answer, then returns.
func TestDrainOnShutdown(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		io.WriteString(w, "done")
	}))
	defer up.Close()
	s := start(t, up.URL, gate.Config{})
	type result struct {
		code int
		body string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, s.base+"/long", nil)
		req.Header.Set("X-Tenant", "acme")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- result{code: resp.StatusCode, body: string(b)}
	}()
	<-arrived
	shut := make(chan error, 1)
	go func() { shut <- s.g.Shutdown(context.Background()) }()
	if err := <-s.errc; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
	s.errc <- http.ErrServerClosed // for the cleanup
	if c, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://")); err == nil {
		c.Close()
		t.Fatal("the gate still accepts connections while draining")
	}
	close(release)
	if r := <-got; r.err != nil || r.code != 200 || r.body != "done" {
		t.Fatalf("in-flight request: %+v", r)
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
}

// TestThrottleFromCollector: a throttle posted to a real collector reaches
// the gate in the reply to its report and turns into 429 + Retry-After for
// that tenant only; the upstream never sees the refused requests.
func TestThrottleFromCollector(t *testing.T) {
	dir := t.TempDir()
	coll, err := collector.New(collector.Config{Listen: "127.0.0.1:0", Store: collector.StoreNone,
		DataDir: filepath.Join(dir, "data"), Token: "report-token", AdminToken: "admin-token"})
	if err != nil {
		t.Fatal(err)
	}
	if err := coll.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer coll.Shutdown(context.Background())
	seen := make(chan string, 16)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("X-Tenant")
		io.WriteString(w, "ok")
	}))
	defer up.Close()
	base := "http://" + coll.Addr()
	s := start(t, up.URL, gate.Config{}, agent.WithCollector(base, "report-token"), agent.WithInterval(time.Hour))
	c, err := api.NewClient(base)
	if err != nil {
		t.Fatal(err)
	}
	rule := policy.Rule{ID: "bigcorp-import", Tenant: "bigcorp", Action: policy.Throttle, RUPerSecond: 0,
		Expires: time.Now().Add(time.Hour), Reason: "import hurting everyone"}
	if _, err := c.PostPolicy(t.Context(), rule, "admin-token"); err != nil {
		t.Fatal(err)
	}
	// One report; its reply carries the policy.
	if err := s.g.Agent().Reporter().ForceFlush(t.Context()); err != nil {
		t.Fatal(err)
	}
	resp, body := get(t, http.DefaultClient, s.base+"/products", "bigcorp")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("bigcorp: %d %q Retry-After=%q", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	resp, body = get(t, http.DefaultClient, s.base+"/products", "acme")
	if resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("acme: %d %q", resp.StatusCode, body)
	}
	if tn := <-seen; tn != "acme" || len(seen) != 0 {
		t.Fatalf("upstream saw %q then %d more", tn, len(seen))
	}
	// Shutdown sends the last report: acme's request reaches the live view
	// although the interval (an hour) never came round.
	if err := s.g.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The live view counts whole seconds: follow its stream (5 s at most)
	// until acme's second is in.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	var acme bool
	var last []api.TenantRow
	c.Stream(ctx, func(snap api.Snapshot) {
		last = snap.Tenants
		for _, row := range snap.Tenants {
			if row.Tenant == "acme" && row.ReqPerSec > 0 {
				acme = true
				cancel()
			}
		}
	})
	if !acme {
		t.Fatalf("the last report did not arrive: %+v", last)
	}
}

// TestH2C: clients may speak HTTP/2 without TLS to the gate, and the gate
// to an h2c upstream.
func TestH2C(t *testing.T) {
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	}))
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	up.Config.Protocols = &p
	up.Start()
	defer up.Close()
	for _, std := range []bool{false, true} { // the own server hands h2c over
		s := start(t, up.URL, gate.Config{H2CUpstream: true, StdServer: std})
		c := &http.Client{Transport: &http.Transport{Protocols: &p}}
		defer c.CloseIdleConnections()
		resp, body := get(t, c, s.base+"/h2", "acme")
		if resp.StatusCode != 200 || resp.ProtoMajor != 2 || body != "HTTP/2.0" {
			t.Fatalf("StdServer=%v: %d %s, upstream saw %q", std, resp.StatusCode, resp.Proto, body)
		}
	}
}

// TestBodiesPassAsTheyAre: a gzip answer reaches the client still
// compressed, as the upstream sent it.
func TestBodiesPassAsTheyAre(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		io.WriteString(w, "not really gzip")
	}))
	defer up.Close()
	s := start(t, up.URL, gate.Config{})
	c := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer c.CloseIdleConnections()
	resp, body := get(t, c, s.base+"/z", "acme")
	if resp.Header.Get("Content-Encoding") != "gzip" || body != "not really gzip" {
		t.Fatalf("%v %q", resp.Header, body)
	}
}

// TestQueueDropIs503: with its one slot taken, the gate's CoDel queue
// drops a T3 request after its wait limit with 503 + Retry-After, and the
// upstream never sees it.
func TestQueueDropIs503(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/hold" {
			t.Errorf("upstream saw %s", r.URL.Path)
			return
		}
		close(arrived)
		<-release
	}))
	defer up.Close()
	s := start(t, up.URL, gate.Config{}, agent.WithSlots(1))
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequest(http.MethodGet, s.base+"/hold", nil)
		req.Header.Set("X-Tenant", "acme")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-arrived
	req, _ := http.NewRequest(http.MethodGet, s.base+"/x", nil)
	req.Header.Set("X-Tenant", "globex")
	req.Header.Set("X-Tier", "T3")
	resp, err := http.DefaultClient.Do(req)
	close(release)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("%d Retry-After=%q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// TestConcurrentRequests: many clients at once through the gate's
// upstream client, each answer the right one, small bodies sent up, the
// upstream's connections reused (run with -race).
func TestConcurrentRequests(t *testing.T) {
	var conns atomic.Int32
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, r.Method+" "+r.URL.Path+" "+string(b))
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	up.Start()
	defer up.Close()
	plans := map[string]enforce.Plan{"big": {Limit: enforce.Limit{RUPerSecond: 1e9, Burst: 1e9}, Weight: 1}}
	s := start(t, up.URL, gate.Config{MaxIdleConnsPerHost: 8}, agent.WithPlans(plans, func(string) string { return "big" }))
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	defer c.CloseIdleConnections()
	const clients, each = 8, 40
	errs := make(chan error, clients)
	for i := range clients {
		go func() {
			for j := range each {
				method, body, want := http.MethodGet, "", fmt.Sprintf("GET /c%d/%d ", i, j)
				if j%3 == 0 {
					method, body, want = http.MethodPost, fmt.Sprintf("body %d", j), fmt.Sprintf("POST /c%d/%d body %d", i, j, j)
				}
				req, _ := http.NewRequest(method, fmt.Sprintf("%s/c%d/%d", s.base, i, j), strings.NewReader(body))
				req.Header.Set("X-Tenant", "acme")
				resp, err := c.Do(req)
				if err != nil {
					errs <- err
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || string(b) != want {
					errs <- fmt.Errorf("%s: %d %q %v, want %q", req.URL.Path, resp.StatusCode, b, err, want)
					return
				}
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n > clients {
		t.Fatalf("%d upstream connections for %d clients: kept-alive ones not reused", n, clients)
	}
}

// TestEarlyHints: a 103 from the upstream reaches the client before the
// final answer.
func TestEarlyHints(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		io.WriteString(w, "page")
	}))
	defer up.Close()
	s := start(t, up.URL, gate.Config{})
	var hints []string
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		hints = append(hints, fmt.Sprint(code, " ", h.Get("Link")))
		return nil
	}}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodGet, s.base+"/", nil)
	req.Header.Set("X-Tenant", "acme")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if len(hints) != 1 || hints[0] != "103 </style.css>; rel=preload" || string(b) != "page" {
		t.Fatalf("hints %q, body %q", hints, b)
	}
}

// TestBaggage: the tenant joins the client's own baggage, and requests
// without any get the tenant and tier alone, each its own.
func TestBaggage(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("Baggage"))
	}))
	defer up.Close()
	s := start(t, up.URL, gate.Config{})
	for _, c := range []struct{ tenant, tier, in, want string }{
		{"acme", "T1", "", "tenant.id=acme,tenant.tier=T1"},
		{"acme", "T2", "", "tenant.id=acme,tenant.tier=T2"},
		{"globex", "", "", "tenant.id=globex"},
		{"acme", "T1", "", "tenant.id=acme,tenant.tier=T1"},
		{"acme", "", "user.id=7", "user.id=7,tenant.id=acme"},
	} {
		req, _ := http.NewRequest(http.MethodGet, s.base+"/", nil)
		req.Header.Set("X-Tenant", c.tenant)
		if c.tier != "" {
			req.Header.Set("X-Tier", c.tier)
		}
		if c.in != "" {
			req.Header.Set("Baggage", c.in)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !sameMembers(string(b), c.want) {
			t.Errorf("%+v: upstream saw baggage %q", c, b)
		}
	}
}

// sameMembers compares two baggage headers as sets of members.
func sameMembers(a, b string) bool {
	x, y := strings.Split(a, ","), strings.Split(b, ",")
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// TestUpstreamNotReadingUploadIs504: an upstream that takes none of a
// large upload (it accepts the connection and reads nothing, so the send
// stalls once the socket buffers are full) is given up on after Timeout
// with 504, as one that does not answer is; before, net/http's transport
// started its timeout only once the body was sent, and the client waited
// for good.
func TestUpstreamNotReadingUploadIs504(t *testing.T) {
	s := start(t, "http://"+silentServer(t), gate.Config{Timeout: 200 * time.Millisecond})
	body := io.MultiReader(bytes.NewReader(make([]byte, 64<<20))) // no length: chunked, read by net/http's server
	req, _ := http.NewRequest(http.MethodPost, s.base+"/upload", body)
	req.Header.Set("X-Tenant", "acme")
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req) // the timeout only turns a hang into a failure
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(b), "took none of the request body for 200ms") {
		t.Fatalf("%d %q", resp.StatusCode, b)
	}
}

// TestShutdownCancelledStopsNow: a Shutdown whose context is cancelled
// (the second signal: stop now) does not give the last report its own
// moment, which it gives when the drain only ran out of time: with a
// collector that never answers, the agent's shutdown ends cancelled, not
// 5 s later on its deadline.
func TestShutdownCancelledStopsNow(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer up.Close()
	s := start(t, up.URL, gate.Config{}, agent.WithCollector("http://"+silentServer(t), ""))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.g.Shutdown(ctx); !errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown on a cancelled context: %v, want the last report cancelled", err)
	}
}

// silentServer listens on loopback and accepts connections on which it
// reads and answers nothing, until the test ends; it returns its address.
func silentServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// TestQueryPassesAsSent: a query with ';' separators reaches the
// upstream as the client sent it, through either server and transport
// (httputil alone drops the parameters that hold one).
func TestQueryPassesAsSent(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.URL.RawQuery)
	}))
	defer up.Close()
	const q = "a=1;b=2&c=%3B&d"
	for _, cfg := range []gate.Config{{}, {StdServer: true, StdTransport: true}} {
		s := start(t, up.URL, cfg)
		resp, body := get(t, http.DefaultClient, s.base+"/q?"+q, "acme")
		if resp.StatusCode != 200 || body != q {
			t.Fatalf("std %v: upstream saw query %q (%d), want %q", cfg.StdServer, body, resp.StatusCode, q)
		}
	}
}

// TestLongHeadIs431: a request head over MaxHeaderBytes is answered 431
// and never forwarded, through either server; one under it passes.
func TestLongHeadIs431(t *testing.T) {
	var seen atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen.Add(1) }))
	defer up.Close()
	for _, cfg := range []gate.Config{{}, {StdServer: true}} {
		s := start(t, up.URL, cfg)
		for _, c := range []struct {
			n    int
			code int
		}{{32 << 10, 200}, {gate.DefaultMaxHeaderBytes + 8<<10, http.StatusRequestHeaderFieldsTooLarge}} {
			req, _ := http.NewRequest(http.MethodGet, s.base+"/h", nil)
			req.Header.Set("X-Tenant", "acme")
			req.Header.Set("X-Long", strings.Repeat("a", c.n))
			before := seen.Load()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			forwarded := seen.Load() - before
			if resp.StatusCode != c.code || forwarded != map[bool]int64{true: 1, false: 0}[c.code == 200] {
				t.Fatalf("std %v, %d-byte header: %d, forwarded %d", cfg.StdServer, c.n, resp.StatusCode, forwarded)
			}
		}
	}
	u, _ := url.Parse(up.URL)
	if err := (gate.Config{Upstream: u, MaxHeaderBytes: 1024}).Validate(); err == nil || !strings.Contains(err.Error(), "under 4096") {
		t.Fatalf("1 KiB bound: %v", err)
	}
}

// With TenantHeader and TierHeader the upstream gets the tenant and tier
// the gate read in those headers, whatever the source, never the client's
// own: here the tenant comes from the path, and a client's X-Tenant and
// X-Tier claims are replaced and dropped.
func TestTenantHeadersSetFromWhatWasRead(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("X-Tenant")+"|"+strings.Join(r.Header.Values("X-Tier"), ","))
	}))
	defer up.Close()
	s := start(t, up.URL, gate.Config{TenantHeader: "X-Tenant", TierHeader: "X-Tier"}, agent.WithTenant(agent.FromPathSegment(0)))
	req, _ := http.NewRequest(http.MethodGet, s.base+"/acme/orders", nil)
	req.Header.Set("X-Tenant", "bigcorp")
	req.Header.Set("X-Tier", "T0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "acme|" {
		t.Fatalf("upstream saw %q (%d), want acme and no tier", b, resp.StatusCode)
	}
}
