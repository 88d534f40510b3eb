package gate_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/gate"
)

// TestClientBodyFaultsAre400: a request body the client breaks —
// malformed chunked framing, or its side of the connection closed before
// the body's end, on the own server's path (small, known length) and on
// net/http's (large, chunked) — is answered 400 and counted bad_request,
// never 502 upstream_error, and no empty 200 is sent for it.
func TestClientBodyFaultsAre400(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(up.Close)
	reg := prometheus.NewPedanticRegistry()
	s := start(t, up.URL, gate.Config{Registerer: reg})
	const h = "POST /upload HTTP/1.1\r\nHost: gate\r\nX-Tenant: acme\r\n"
	cases := []struct {
		name, req string
		halfClose bool
	}{
		{"a malformed chunk size", h + "Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", false},
		{"a chunk size too large", h + "Transfer-Encoding: chunked\r\n\r\nffffffffffffffffff1\r\nhello\r\n0\r\n\r\n", false},
		{"a small body cut short", h + "Content-Length: 1000\r\n\r\n" + strings.Repeat("a", 100), true},
		{"a large body cut short", h + "Content-Length: 100000\r\n\r\n" + strings.Repeat("a", 1000), true},
		{"a chunked body cut short", h + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, tc.req)
			if tc.halfClose {
				c.(*net.TCPConn).CloseWrite()
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "request body") {
				t.Fatalf("%d %q, want 400 naming the request body", resp.StatusCode, b)
			}
		})
	}
	for outcome, want := range map[string]float64{"bad_request": float64(len(cases)), "upstream_error": 0, "upstream": 0} {
		if got := counted(t, reg, "qtop_gate_requests_total", outcome); got != want {
			t.Errorf("%s = %v, want %v", outcome, got, want)
		}
	}
}

// TestBrokenAnswerIsCounted: an upstream that closes its connection in
// the middle of an answer leaves the client an answer cut short (as
// before), and the gate counts it, through either upstream client.
func TestBrokenAnswerIsCounted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				if _, err := http.ReadRequest(bufio.NewReader(nc)); err != nil {
					return
				}
				io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\ntwenty bytes of it..")
			}()
		}
	}()
	for _, std := range []bool{false, true} {
		t.Run(fmt.Sprintf("StdTransport=%v", std), func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			s := start(t, "http://"+ln.Addr().String(), gate.Config{Registerer: reg, StdTransport: std})
			req, _ := http.NewRequest("GET", s.base+"/break", nil)
			req.Header.Set("X-Tenant", "acme")
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if err == nil {
				t.Fatal("the client read a whole answer")
			}
			if got := counted(t, reg, "qtop_gate_upstream_answers_cut_total", "broken"); got != 1 {
				t.Fatalf("answers cut, broken = %v, want 1", got)
			}
		})
	}
}

// TestOddRequests: CONNECT is refused (405), so is a target of * but for
// OPTIONS (400, from either server), an HTTP/1.0 client gets no
// 1xx answer, and behind a trusted balancer the client's scheme and host
// reach the upstream.
func TestOddRequests(t *testing.T) {
	var seen atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		if r.URL.Path == "/early" {
			w.Header().Set("Link", "</a.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
		}
		io.WriteString(w, r.Header.Get("X-Forwarded-Proto")+"|"+r.Header.Get("X-Forwarded-Host"))
	}))
	t.Cleanup(up.Close)
	s := start(t, up.URL, gate.Config{TrustForwarded: true})

	c := dialRaw(t, s.base)
	c.send("CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\nX-Tenant: acme\r\n\r\n")
	if resp, _ := c.read("CONNECT"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	if seen.Load() != 0 {
		t.Fatal("CONNECT reached the upstream")
	}
	for _, srv := range []*started{s, start(t, up.URL, gate.Config{StdServer: true})} {
		c = dialRaw(t, srv.base)
		c.send("GET * HTTP/1.1\r\nHost: gate\r\nX-Tenant: acme\r\n\r\n")
		if resp, _ := c.read("GET *"); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("GET *: %d", resp.StatusCode)
		}
	}
	if seen.Load() != 0 {
		t.Fatal("GET * reached the upstream")
	}

	c = dialRaw(t, s.base)
	c.send("GET /early HTTP/1.0\r\nHost: gate\r\nX-Tenant: acme\r\n\r\n")
	if resp, _ := c.read("GET"); resp.StatusCode != 200 {
		t.Fatalf("HTTP/1.0 got %d first, want the 200", resp.StatusCode)
	}

	req, _ := http.NewRequest("GET", s.base+"/x", nil)
	req.Header.Set("X-Tenant", "acme")
	req.Header.Set("X-Forwarded-Proto", "https")
	req.Header.Set("X-Forwarded-Host", "shop.example.com")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "https|shop.example.com" {
		t.Fatalf("behind a trusted balancer the upstream saw %q", b)
	}
}
