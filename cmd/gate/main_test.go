package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestFlags(t *testing.T) {
	var out, errb strings.Builder
	if code := run([]string{"--version"}, &out, &errb, nil); code != 0 || !strings.HasPrefix(out.String(), "gate ") {
		t.Fatalf("--version: %d %q", code, out.String())
	}
	errb.Reset()
	if code := run([]string{"--help"}, &out, &errb, nil); code != 0 || !strings.Contains(errb.String(), "Examples:") ||
		!strings.Contains(errb.String(), "$QTOP_UPSTREAM") {
		t.Fatalf("--help: %d %q", code, errb.String())
	}
	dir := t.TempDir()
	badPlans := filepath.Join(dir, "plans.json")
	os.WriteFile(badPlans, []byte(`{"plans": {"a": {"limit": {"ru_per_second": 1, "burst": 1}, "weight": 1}}, "tenants": {"x": "b"}, "default": "a"}`), 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--upstream and --service are required"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--service", "s", "--tenant", "cookie"}, "want a list of header, jwt, path, baggage"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--service", "s", "--tenant", "jwt"}, "--tenant jwt needs --jwt-key-file (HS256), --jwt-public-key-file or --jwks-url"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--service", "s", "--tenant", "jwt", "--jwks-url", "http://idp.example.com/jwks"}, "want https (plain http only on loopback"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--service", "s", "--tenant", "jwt", "--jwks-url", "https://idp/jwks", "--jwt-key-file", "k"}, "--jwks-url takes the keys from the key set"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--service", "s", "--tenant", "jwt", "--jwt-public-key-file", badPlans}, "--jwt-public-key-file: no PEM block"},
		{[]string{"--upstream", "ftp://x", "--service", "s"}, "gate: bad configuration: upstream"}, // said once, not "gate: gate:"
		{[]string{"--upstream", "http://127.0.0.1:1", "--service", "s", "--upstream-timeout", "-5s"}, "--upstream-timeout -5s: want a duration ≥ 0"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--service", "s", "--plans", badPlans}, `plan "b" is not in "plans"`},
		{[]string{"--upstream", "http://127.0.0.1:1", "--service", "s", "extra"}, `unexpected argument "extra"`},
	} {
		errb.Reset()
		if code := run(c.args, &out, &errb, nil); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: %d %q, want %q", c.args, code, errb.String(), c.want)
		}
	}
	t.Setenv("QTOP_GATE_STD_TRANSPORT", "true")
	if f, err := parse(nil, &errb); err != nil || !f.stdTransport {
		t.Errorf("$QTOP_GATE_STD_TRANSPORT=true: %v %v", f.stdTransport, err)
	}
	t.Setenv("QTOP_GATE_SLOTS", "many")
	errb.Reset()
	if code := run(nil, &out, &errb, nil); code != 2 || !strings.Contains(errb.String(), `$QTOP_GATE_SLOTS="many": want an integer`) {
		t.Errorf("bad env: %d %q", code, errb.String())
	}
}

// TestServeAndDrain runs the command in front of an upstream, sends a
// request through it, then SIGTERM: it drains and exits 0.
func TestServeAndDrain(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("Baggage"))
	}))
	defer up.Close()
	t.Setenv("QTOP_UPSTREAM", up.URL)
	ready := make(chan string, 1)
	done := make(chan int, 1)
	var errb strings.Builder
	go func() {
		done <- run([]string{"--listen", "127.0.0.1:0", "--service", "shop", "--grace", "5s"}, io.Discard, &errb, ready)
	}()
	var addr string
	select {
	case addr = <-ready:
	case code := <-done:
		t.Fatalf("exited %d: %s", code, errb.String())
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/x", nil)
	req.Header.Set("X-Tenant", "acme")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "tenant.id=acme" {
		t.Fatalf("%d %q", resp.StatusCode, b)
	}
	// No tenant: the answer says where the gate looks for one.
	resp, err = http.Get("http://" + addr + "/x")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "agent: request has no tenant: the gate reads it from the X-Tenant header, then the W3C baggage member tenant.id\n"; resp.StatusCode != 400 || string(b) != want {
		t.Fatalf("no tenant: %d %q, want 400 %q", resp.StatusCode, b, want)
	}
	http.DefaultClient.CloseIdleConnections()
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "gate: draining") || !strings.Contains(errb.String(), "gate: stopped") {
		t.Fatalf("log: %s", errb.String())
	}
}

// TestReadinessWhileDraining: the metrics address answers /healthz and
// /readyz; from SIGTERM on, while a request in flight holds the drain,
// /readyz answers 503 (a load balancer stops sending) and /healthz still
// 200, and the held request is answered before the gate exits 0.
func TestReadinessWhileDraining(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		io.WriteString(w, "late")
	}))
	defer up.Close()
	t.Setenv("QTOP_UPSTREAM", up.URL)
	ready := make(chan string, 2)
	done := make(chan int, 1)
	var errb strings.Builder
	go func() {
		done <- run([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--service", "shop", "--grace", "1m"}, io.Discard, &errb, ready)
	}()
	var addr, maddr string
	select {
	case addr = <-ready:
		maddr = <-ready
	case code := <-done:
		t.Fatalf("exited %d: %s", code, errb.String())
	}
	probe := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + maddr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if c, b := probe("/readyz"); c != 200 || b != "ready\n" {
		t.Fatalf("/readyz before the signal: %d %q", c, b)
	}
	held := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/slow", nil)
		req.Header.Set("X-Tenant", "acme")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			held <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		held <- fmt.Sprintf("%d %s", resp.StatusCode, b)
	}()
	<-arrived
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	// The signal is handled on another goroutine: wait for its effect.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, b := probe("/readyz")
		if c == http.StatusServiceUnavailable && b == "draining\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz 10 s after SIGTERM: %d %q", c, b)
		}
		runtime.Gosched()
	}
	if c, _ := probe("/healthz"); c != 200 {
		t.Fatalf("/healthz while draining: %d", c)
	}
	select {
	case code := <-done:
		t.Fatalf("exited %d with a request in flight: %s", code, errb.String())
	default:
	}
	close(release)
	if got := <-held; got != "200 late" {
		t.Fatalf("the request in flight: %q", got)
	}
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

// TestDrainDelayAndSecondSignal: with --drain-delay, after SIGTERM
// /readyz answers 503 while the gate goes on serving new requests; a
// second signal cuts the delay and the drain short: the gate exits at
// once though a request is still in flight, and says so.
func TestDrainDelayAndSecondSignal(t *testing.T) {
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			arrived <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		io.WriteString(w, "ok")
	}))
	defer up.Close()
	defer close(release) // first: the request the gate left behind ends
	t.Setenv("QTOP_UPSTREAM", up.URL)
	ready := make(chan string, 2)
	done := make(chan int, 1)
	var errb lockedBuilder
	go func() {
		done <- run([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--service", "shop",
			"--drain-delay", "1h", "--grace", "1h"}, io.Discard, &errb, ready)
	}()
	var addr, maddr string
	select {
	case addr = <-ready:
		maddr = <-ready
	case code := <-done:
		t.Fatalf("exited %d: %s", code, errb.String())
	}
	get := func(base, path string) (int, error) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+base+path, nil)
		req.Header.Set("X-Tenant", "acme")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	go get(addr, "/slow") // held until the end
	<-arrived
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, _ := get(maddr, "/readyz"); c == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/readyz was not 503 10 s after SIGTERM")
		}
		runtime.Gosched()
	}
	if c, err := get(addr, "/new"); c != 200 {
		t.Fatalf("a new request during the drain delay: %d %v", c, err)
	}
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	if code := <-done; code != 1 {
		t.Fatalf("exit %d after the second signal with a request in flight, want 1: %s", code, errb.String())
	}
	log := errb.String()
	for _, want := range []string{"gate: not ready; still serving", "gate: second signal: stopping now", "drain ended with requests still in flight", "in_flight=1"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
}

// lockedBuilder is a log destination written from several goroutines.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestTenantHint(t *testing.T) {
	var f flags
	f.tenant, f.tenantHeader, f.pathSegment, f.jwt.tenantClaim = "jwt, header,path,baggage", "X-Org", 2, "org"
	want := "the gate reads it from the org claim of a bearer JWT, then the X-Org header, then the path's segment 2 (counting from 0), then the W3C baggage member tenant.id"
	if got := tenantHint(f); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}
