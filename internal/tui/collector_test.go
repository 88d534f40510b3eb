package tui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/pgactivity"
	"github.com/qtop-dev/qtop/policy"
)

// realCollector serves a real collector (no store) on a free port; stop
// closes its listener and streams.
func realCollector(t *testing.T) (srv *collector.Server, url string, stop func()) {
	t.Helper()
	srv, err := collector.New(collector.Config{Store: collector.StoreNone, DataDir: t.TempDir(), Token: "s3cret", AdminToken: "s3cret", Demo: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	ctx, cancel := context.WithCancel(context.Background())
	srv.Run(ctx)
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		srv.Shutdown(context.Background()) // ends the streams
		hs.Close()
	}
	t.Cleanup(stop)
	return srv, "http://" + ln.Addr().String(), stop
}

// switchboard routes the source's connections to the collector at addr:
// the test moves it to a collector started again on another port rather
// than waiting for the stopped one's port to be free again.
type switchboard struct {
	mu   sync.Mutex
	addr string
}

func (b *switchboard) route(url string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.addr = strings.TrimPrefix(url, "http://")
}

func (b *switchboard) client() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		b.mu.Lock()
		addr := b.addr
		b.mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}}
}

func TestCollectorSourceStreamThrottleReconnect(t *testing.T) {
	srv, url, stop := realCollector(t)
	var sb switchboard
	sb.route(url)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	src, err := NewCollector(strings.TrimPrefix(url, "http://"), "s3cret", api.WithHTTPClient(sb.client()))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if src.Describe() != "collector "+url {
		t.Fatalf("describe %q", src.Describe())
	}
	// The stream gives a snapshot per second, with the query's measure.
	for _, q := range []Query{{Measure: api.MeasureRU, Top: 5}, {Measure: api.MeasureDB, Top: 5}} {
		s, err := src.Next(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if s.Measure != q.Measure || s.Source != api.SourceDemo {
			t.Fatalf("query %+v: snapshot measure %q source %q", q, s.Measure, s.Source)
		}
	}
	// t posts a rule with the token.
	if err := src.Throttle(ctx, rule("bigcorp")); err != nil {
		t.Fatal(err)
	}
	if p := srv.Policy(); len(p.Rules) != 1 || p.Rules[0].Tenant != "bigcorp" {
		t.Fatalf("policy %+v", p)
	}
	bad, _ := NewCollector(url, "wrong")
	defer bad.Close()
	if err := bad.Throttle(ctx, rule("bigcorp")); !errors.Is(err, api.ErrUnauthorized) ||
		!strings.Contains(err.Error(), "--admin-token, QTOP_ADMIN_TOKEN or QTOP_ADMIN_TOKEN_FILE") || !strings.Contains(err.Error(), "DATA_DIR/admin-token") {
		t.Fatalf("wrong token: %v", err)
	}
	if err := src.Throttle(ctx, policy.Rule{Tenant: "bigcorp", Action: policy.Throttle}); !errors.Is(err, api.ErrStatus) {
		t.Fatalf("invalid rule: %v", err)
	}
	if s, err := src.Once(ctx, Query{Measure: api.MeasureReq, Top: 3}); err != nil || s.Measure != api.MeasureReq {
		t.Fatalf("once: %v %q", err, s.Measure)
	}

	// The collector goes away: Next says so, with the URL and a hint …
	stop()
	for i := 0; ; i++ {
		_, err := src.Next(ctx, Query{Measure: api.MeasureDB, Top: 5})
		if errors.Is(err, ErrUnreachable) && strings.Contains(err.Error(), "no collector answers at "+url) && strings.Contains(err.Error(), "qtop demo") {
			break
		}
		if err == nil && i > 5 || i > 10 {
			t.Fatalf("after the collector stopped: %v", err)
		}
	}
	// … and reconnects when it is back (on another port, routed to).
	_, url2, _ := realCollector(t)
	sb.route(url2)
	if _, err := src.Next(ctx, Query{Measure: api.MeasureDB, Top: 5}); err != nil {
		t.Fatalf("after the collector came back: %v", err)
	}
	src.Close()
	if _, err := src.Next(ctx, Query{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
	if err := src.Cancel(ctx, 1); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("cancel: %v", err)
	}
	if err := src.Terminate(ctx, 1); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("terminate: %v", err)
	}
}

func TestNewCollectorBadURL(t *testing.T) {
	for _, u := range []string{"ftp://x:1", "http://", "::nope"} {
		if _, err := NewCollector(u, ""); !errors.Is(err, ErrInput) {
			t.Errorf("%q: %v", u, err)
		}
	}
}

// TestCollectorUnknownCA: a collector whose certificate qtop cannot
// verify is named with what to do (the CA file), not with how to start a
// demo.
func TestCollectorUnknownCA(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	src, err := NewCollector(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	_, err = src.Next(context.Background(), Query{})
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "--ca-file") || strings.Contains(err.Error(), "qtop demo") {
		t.Fatalf("error %v", err)
	}
}

// TestCollectorSignals: c and k on a collector go to its signal endpoint
// with the admin token and only while it samples a PostgreSQL; a backend
// that moved on is said as qtop --postgres says it.
func TestCollectorSignals(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var sig api.PGSignal
		json.NewDecoder(r.Body).Decode(&sig)
		got = append(got, r.URL.Path+" "+r.Header.Get("Authorization")+" "+sig.Action+" "+strconv.Itoa(int(sig.PID))+" "+sig.Actor)
		if sig.PID == 2 {
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `{"error":"backend 2 moved on: it runs another statement"}`)
			return
		}
		io.WriteString(w, `{"result":"done"}`)
	}))
	defer srv.Close()
	src, err := NewCollector(srv.URL, "admin-secret")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if src.FeaturesOf(&api.Snapshot{}).Signal || !src.FeaturesOf(&api.Snapshot{Collector: api.CollectorStatus{Sampler: true}}).Signal {
		t.Fatal("signal offered without a sampler, or not with one")
	}
	ctx := context.Background()
	if err := src.CancelStatement(ctx, pgactivity.Target{PID: 1, QueryStart: time.Now()}, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := src.TerminateSession(ctx, pgactivity.Target{PID: 2, BackendStart: time.Now()}, "alice"); !errors.Is(err, pgactivity.ErrMovedOn) {
		t.Fatalf("moved on: %v", err)
	}
	want := []string{api.PathPGSignal + " Bearer admin-secret cancel 1 alice", api.PathPGSignal + " Bearer admin-secret terminate 2 alice"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("sent:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestReadRefusalSaysWhatToGive: a collector refusing qtop's read token
// is explained in the UI as qtop --once explains it: what qtop reads with.
func TestReadRefusalSaysWhatToGive(t *testing.T) {
	err := (&Collector{base: "127.0.0.1:7070"}).explain(fmt.Errorf("%w: collector: unauthorized: wrong token for read", api.ErrUnauthorized))
	if !errors.Is(err, api.ErrUnauthorized) || !strings.Contains(err.Error(), "qtop reads with --token or QTOP_TOKEN") {
		t.Fatalf("%v", err)
	}
}
