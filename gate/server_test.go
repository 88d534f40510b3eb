package gate_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/agent"
	"github.com/qtop-dev/qtop/gate"
)

// echoUpstream answers with what it got: method, path, the body and how
// it was framed.
func echoUpstream(t *testing.T) *httptest.Server {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %q te=%v", r.Method, r.URL.RequestURI(), b, r.TransferEncoding)
	}))
	t.Cleanup(up.Close)
	return up
}

// rawConn is a client connection that writes bytes as they are and reads
// responses in order.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, base string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

func (r *rawConn) send(s string) {
	r.t.Helper()
	if _, err := io.WriteString(r.c, s); err != nil {
		r.t.Fatal(err)
	}
}

// read reads one response to a request of method.
func (r *rawConn) read(method string) (*http.Response, string) {
	r.t.Helper()
	resp, err := http.ReadResponse(r.br, &http.Request{Method: method})
	if err != nil {
		r.t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatalf("body: %v", err)
	}
	return resp, string(b)
}

// eof reports whether the server closed the connection.
func (r *rawConn) eof() bool {
	_, err := r.br.ReadByte()
	return err != nil
}

// counted is the value of the counter name in reg, of the series with
// the label value given ("" for a series without labels).
func counted(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if l := m.GetLabel(); label == "" || len(l) > 0 && l[0].GetValue() == label {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s{%q}", name, label)
	return 0
}

func handoffs(t *testing.T, reg *prometheus.Registry) float64 {
	return counted(t, reg, "qtop_gate_handed_off_connections_total", "")
}

func clientGone(t *testing.T, reg *prometheus.Registry) float64 {
	return counted(t, reg, "qtop_gate_requests_total", "client_gone")
}

// TestServerKeepAliveAndHandOff: the gate's own server answers requests
// one after the other and pipelined on one connection, a request body of
// known length included; a chunked upload hands the connection, with the
// bytes read so far, to net/http's server, which answers it and the
// requests after it.
func TestServerKeepAliveAndHandOff(t *testing.T) {
	up := echoUpstream(t)
	reg := prometheus.NewPedanticRegistry()
	s := start(t, up.URL, gate.Config{Registerer: reg})
	c := dialRaw(t, s.base)
	const h = "Host: gate\r\nX-Tenant: acme\r\n"
	c.send("GET /a?x=1 HTTP/1.1\r\n" + h + "\r\n")
	if resp, body := c.read("GET"); resp.StatusCode != 200 || body != `GET /a?x=1 "" te=[]` {
		t.Fatalf("GET: %d %q", resp.StatusCode, body)
	}
	c.send("GET /b HTTP/1.1\r\n" + h + "\r\nHEAD /c HTTP/1.1\r\n" + h + "\r\nPOST /d HTTP/1.1\r\n" + h + "Content-Length: 5\r\n\r\nhello")
	for _, want := range []struct{ method, body string }{{"GET", `GET /b "" te=[]`}, {"HEAD", ""}, {"POST", `POST /d "hello" te=[]`}} {
		if resp, body := c.read(want.method); resp.StatusCode != 200 || body != want.body {
			t.Fatalf("pipelined %s: %d %q, want %q", want.method, resp.StatusCode, body, want.body)
		}
	}
	if n := handoffs(t, reg); n != 0 {
		t.Fatalf("%v connections handed off before the chunked upload", n)
	}
	// A chunked upload goes to net/http's server, and its connection is
	// closed after the answer (TestChunkedRequestClosesOnNetHTTP).
	c.send("POST /e HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
	if resp, body := c.read("POST"); resp.StatusCode != 200 || body != `POST /e "hello" te=[chunked]` || !resp.Close {
		t.Fatalf("chunked POST: %d %q close=%v", resp.StatusCode, body, resp.Close)
	}
	if !c.eof() {
		t.Fatal("the connection stayed open after a chunked request")
	}
	// Expect: 100-continue is handed off too, and net/http's server then
	// keeps the connection.
	c = dialRaw(t, s.base)
	c.send("POST /e2 HTTP/1.1\r\n" + h + "Expect: 100-continue\r\nContent-Length: 5\r\n\r\nhello")
	resp, body := c.read("POST")
	// Any number of 100s may come first (RFC 9110, 15.2): net/http's
	// server sends one when the proxy reads the body, and the upstream's
	// is passed on too when it comes after the transport's
	// ExpectContinueTimeout (a busy machine).
	for i := 0; resp.StatusCode == http.StatusContinue && i < 3; i++ {
		resp, body = c.read("POST")
	}
	if resp.StatusCode != 200 || body != `POST /e2 "hello" te=[]` {
		t.Fatalf("POST with Expect: %d %q", resp.StatusCode, body)
	}
	c.send("GET /f HTTP/1.1\r\n" + h + "\r\n")
	if resp, body := c.read("GET"); resp.StatusCode != 200 || body != `GET /f "" te=[]` {
		t.Fatalf("GET after the hand-off: %d %q", resp.StatusCode, body)
	}
	if n := handoffs(t, reg); n != 2 {
		t.Fatalf("%v connections handed off, want 2", n)
	}
	c.send("GET /g HTTP/1.1\r\n" + h + "Connection: close\r\n\r\n")
	if resp, _ := c.read("GET"); !resp.Close {
		t.Fatal("Connection: close not answered in kind")
	}
	if !c.eof() {
		t.Fatal("the connection stayed open after Connection: close")
	}
}

// TestServerHandsOffOddRequests: heads the own server does not take are
// answered by net/http's as it would answer them.
func TestServerHandsOffOddRequests(t *testing.T) {
	up := echoUpstream(t)
	reg := prometheus.NewPedanticRegistry()
	s := start(t, up.URL, gate.Config{Registerer: reg})
	big := strings.Repeat("v", 5000)
	for _, tc := range []struct {
		name, req string
		status    int
		body      string
	}{
		{"HTTP/1.0", "GET /a HTTP/1.0\r\nHost: gate\r\nX-Tenant: acme\r\n\r\n", 200, `GET /a "" te=[]`},
		{"a head over 4 KiB", "GET /a HTTP/1.1\r\nHost: gate\r\nX-Tenant: acme\r\nX-Big: " + big + "\r\n\r\n", 200, `GET /a "" te=[]`},
		{"bare line feeds", "GET /a HTTP/1.1\nHost: gate\nX-Tenant: acme\n\n", 200, `GET /a "" te=[]`},
		{"a large upload", "POST /a HTTP/1.1\r\nHost: gate\r\nX-Tenant: acme\r\nContent-Length: 70000\r\n\r\n" + strings.Repeat("x", 70000), 200,
			fmt.Sprintf("POST /a %q te=[]", strings.Repeat("x", 70000))},
		{"no Host", "GET /a HTTP/1.1\r\nX-Tenant: acme\r\n\r\n", 400, ""},
		{"two Hosts", "GET /a HTTP/1.1\r\nHost: a\r\nHost: b\r\nX-Tenant: acme\r\n\r\n", 400, ""},
		{"a space in the target", "GET /a b HTTP/1.1\r\nHost: gate\r\nX-Tenant: acme\r\n\r\n", 400, ""},
		{"a NUL in a value", "GET /a HTTP/1.1\r\nHost: gate\r\nX-Tenant: ac\x00me\r\n\r\n", 400, ""},
		{"two lengths that differ", "POST /a HTTP/1.1\r\nHost: gate\r\nX-Tenant: acme\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, s.base)
			c.send(tc.req)
			resp, body := c.read("GET")
			if resp.StatusCode != tc.status || tc.status == 200 && body != tc.body {
				t.Fatalf("%d %.80q, want %d %.80q", resp.StatusCode, body, tc.status, tc.body)
			}
		})
	}
	if n := handoffs(t, reg); n != 8 { // not the space in the target: its request line is malformed
		t.Fatalf("%v connections handed off, want 8", n)
	}
	// Expect: 100-continue, through net/http's client.
	req, _ := http.NewRequest("PUT", s.base+"/x", strings.NewReader("body"))
	req.Header.Set("X-Tenant", "acme")
	req.Header.Set("Expect", "100-continue")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != `PUT /x "body" te=[]` {
		t.Fatalf("Expect: %d %q", resp.StatusCode, b)
	}
}

// TestServerResponseFraming: the own server frames each response as
// net/http would: a short body of unknown length gets a Content-Length,
// a long or flushed one is chunked (with its trailers), HEAD, 204 and 304
// have no body, and a body shorter than its Content-Length ends the
// connection.
func TestServerResponseFraming(t *testing.T) {
	long := strings.Repeat("0123456789", 1000)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/short":
			io.WriteString(w, "hi")
		case "/long":
			for i := 0; i < len(long); i += 3000 {
				io.WriteString(w, long[i:min(i+3000, len(long))])
				w.(http.Flusher).Flush()
			}
		case "/trailer":
			w.Header().Set("Trailer", "X-Sum")
			io.WriteString(w, "abc")
			w.(http.Flusher).Flush()
			w.Header().Set("X-Sum", "42")
		case "/none":
			w.WriteHeader(http.StatusNoContent)
		case "/cached":
			w.WriteHeader(http.StatusNotModified)
		case "/cut":
			c, brw, _ := http.NewResponseController(w).Hijack()
			brw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
			brw.Flush()
			c.Close()
		}
	}))
	defer up.Close()
	s := start(t, up.URL, gate.Config{})
	reused, last := 0, false
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	do := func(method, path string) (*http.Response, string, error) {
		req, _ := http.NewRequest(method, s.base+path, nil)
		req.Header.Set("X-Tenant", "acme")
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) {
				if last = i.Reused; last {
					reused++
				}
			}}))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, string(b), err
	}
	if resp, b, err := do("GET", "/short"); err != nil || b != "hi" || resp.ContentLength != 2 || resp.TransferEncoding != nil {
		t.Fatalf("short: %q %d %v %v", b, resp.ContentLength, resp.TransferEncoding, err)
	}
	if resp, b, err := do("GET", "/long"); err != nil || b != long || resp.ContentLength != -1 || resp.TransferEncoding[0] != "chunked" {
		t.Fatalf("long: %d bytes, length %d %v %v", len(b), resp.ContentLength, resp.TransferEncoding, err)
	}
	if resp, b, err := do("GET", "/trailer"); err != nil || b != "abc" || resp.Trailer.Get("X-Sum") != "42" {
		t.Fatalf("trailer: %q %v %v", b, resp.Trailer, err)
	}
	if resp, b, err := do("HEAD", "/short"); err != nil || b != "" || resp.StatusCode != 200 {
		t.Fatalf("HEAD: %q %d %v", b, resp.StatusCode, err)
	}
	for _, p := range []string{"/none", "/cached"} {
		if resp, b, err := do("GET", p); err != nil || b != "" || resp.Header.Get("Content-Length") != "" || resp.TransferEncoding != nil {
			t.Fatalf("%s: %d %q %v %v", p, resp.StatusCode, b, resp.Header, err)
		}
	}
	if reused != 5 {
		t.Fatalf("%d of 6 requests reused the connection, want 5", reused)
	}
	if _, b, err := do("GET", "/cut"); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut: %q %v, want an unexpected EOF", b, err)
	}
	if _, b, err := do("GET", "/short"); err != nil || b != "hi" {
		t.Fatalf("after the cut: %q %v", b, err)
	}
	if last {
		t.Fatal("a connection whose response was cut short was used again")
	}
}

// TestServerRefusalKeepsConnection: a request the gate refuses without
// reading its body leaves the connection usable for the next.
func TestServerRefusalKeepsConnection(t *testing.T) {
	up := echoUpstream(t)
	s := start(t, up.URL, gate.Config{})
	c := dialRaw(t, s.base)
	c.send("POST /a HTTP/1.1\r\nHost: gate\r\nContent-Length: 11\r\n\r\nhello world")
	if resp, _ := c.read("POST"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("no tenant: %d", resp.StatusCode)
	}
	c.send("GET /b HTTP/1.1\r\nHost: gate\r\nX-Tenant: acme\r\n\r\n")
	if resp, body := c.read("GET"); resp.StatusCode != 200 || body != `GET /b "" te=[]` {
		t.Fatalf("after the refusal: %d %q", resp.StatusCode, body)
	}
}

// TestServerClientGone: a client that leaves while the upstream works
// cancels the upstream request, and the gate counts it gone.
func TestServerClientGone(t *testing.T) {
	defer gate.SetClientWatchDelay(gate.SetClientWatchDelay(0))
	started, canceled := make(chan struct{}), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
		close(canceled)
	}))
	defer up.Close()
	reg := prometheus.NewPedanticRegistry()
	s := start(t, up.URL, gate.Config{Registerer: reg})
	c := dialRaw(t, s.base)
	c.send("GET /slow HTTP/1.1\r\nHost: gate\r\nX-Tenant: acme\r\n\r\n")
	<-started
	c.c.Close()
	<-canceled
	if err := s.g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := clientGone(t, reg); got != 1 {
		t.Fatalf("client_gone = %v, want 1", got)
	}
}

// TestServerShutdownClosesIdle: Shutdown closes kept-alive connections
// that wait for a request instead of waiting for them.
func TestServerShutdownClosesIdle(t *testing.T) {
	up := echoUpstream(t)
	s := start(t, up.URL, gate.Config{})
	c := dialRaw(t, s.base)
	c.send("GET /a HTTP/1.1\r\nHost: gate\r\nX-Tenant: acme\r\n\r\n")
	if resp, _ := c.read("GET"); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	if err := s.g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !c.eof() {
		t.Fatal("an idle connection stayed open after Shutdown")
	}
}

// TestServerHeadTimeout: a head that stops coming (slowloris) is cut off.
func TestServerHeadTimeout(t *testing.T) {
	defer gate.SetReadHeaderTimeout(gate.SetReadHeaderTimeout(1))
	up := echoUpstream(t)
	s := start(t, up.URL, gate.Config{})
	c := dialRaw(t, s.base)
	c.send("GET /a HTTP/1.1\r\nHo")
	if !c.eof() {
		t.Fatal("a head that never ends kept its connection")
	}
}

// TestSlowReaderIsCutOff: a client that reads nothing of a large response
// is cut off after the send timeout, counted client_gone, and its
// admission slot goes to the next client (one slot here; without the
// timeout the slot stayed taken for good).
func TestSlowReaderIsCutOff(t *testing.T) {
	for _, std := range []bool{false, true} {
		t.Run(fmt.Sprintf("StdServer=%v", std), func(t *testing.T) {
			upDone := make(chan struct{}, 1)
			chunk := []byte(strings.Repeat("x", 64<<10))
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/big" {
					io.WriteString(w, "ok")
					return
				}
				for { // until the gate stops taking it
					if _, err := w.Write(chunk); err != nil {
						upDone <- struct{}{}
						return
					}
				}
			}))
			defer up.Close()
			reg := prometheus.NewPedanticRegistry()
			s := start(t, up.URL, gate.Config{Registerer: reg, SendTimeout: 50 * time.Millisecond, StdServer: std}, agent.WithSlots(1))
			c, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.(*net.TCPConn).SetReadBuffer(4096)
			io.WriteString(c, "GET /big HTTP/1.1\r\nHost: gate\r\nX-Tenant: slow\r\n\r\n")
			<-upDone // the gate cut the client off and closed the upstream's answer
			if _, err := io.Copy(io.Discard, c); err == nil {
				t.Fatal("the connection ended with a FIN: the kernel kept what it held for the client")
			}
			resp, body := get(t, http.DefaultClient, s.base+"/small", "next")
			if resp.StatusCode != 200 || body != "ok" {
				t.Fatalf("the next client: %d %q", resp.StatusCode, body)
			}
			if err := s.g.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := clientGone(t, reg); got != 1 {
				t.Fatalf("client_gone = %v, want 1", got)
			}
		})
	}
}

// TestChunkedRequestClosesOnNetHTTP: a chunked request served by
// net/http's server (a head above the gate's own server's 4 KiB, any later
// request of a connection handed to net/http, --std-server) may have come
// with a Content-Length too, which net/http drops while it keeps the
// connection: the bytes that length did not count would be served as a
// request of their own. The connection is closed after the answer
// (RFC 9112, 6.1), so they never are.
func TestChunkedRequestClosesOnNetHTTP(t *testing.T) {
	var paths []string
	var mu sync.Mutex
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
	}))
	t.Cleanup(up.Close)
	smuggle := "POST /upload HTTP/1.1\r\nHost: gate\r\nX-Tenant: acme\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n%s\r\n" +
		"5\r\nhello\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: gate\r\nX-Tenant: acme\r\n\r\n"
	for _, c := range []struct {
		name  string
		std   bool
		first string // sent before it, on the same connection
		pad   string
	}{
		{"head above 4 KiB", false, "", "X-Pad: " + strings.Repeat("p", 5000) + "\r\n"},
		{"after a chunked request", false, "POST /first HTTP/1.1\r\nHost: gate\r\nX-Tenant: acme\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", ""},
		{"std server", true, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			mu.Lock()
			paths = nil
			mu.Unlock()
			s := start(t, up.URL, gate.Config{Registerer: prometheus.NewPedanticRegistry(), StdServer: c.std})
			conn := dialRaw(t, s.base)
			conn.send(c.first + fmt.Sprintf(smuggle, c.pad))
			resp, _ := conn.read("POST")
			if !resp.Close {
				t.Fatalf("%d, the connection kept open", resp.StatusCode)
			}
			if !conn.eof() {
				t.Fatal("the connection stayed open")
			}
			mu.Lock()
			defer mu.Unlock()
			for _, p := range paths {
				if p == "/smuggled" {
					t.Fatalf("the upstream got %q", paths)
				}
			}
		})
	}
}

// TestServerRefusesAmbiguousLength: a request with both Content-Length
// and Transfer-Encoding (in any case) is answered 400 and its connection
// closed, so what one length counts and the other does not is never read
// as a request of its own (request smuggling); it reaches no upstream.
// A head whose first line is not a request line is answered 400 at once.
// Before, it was handed to net/http, which with h2c on waits for as many
// bytes as HTTP/2's preface: for the header timeout (10 s) when fewer came.
func TestServerRefusesMalformedRequestLine(t *testing.T) {
	s := start(t, echoUpstream(t).URL, gate.Config{})
	for _, head := range []string{"GARBAGE\r\n\r\n", "GET /a\r\n\r\n", "G(T /a HTTP/1.1\r\nHost: g\r\n\r\n", "GET /a HTTP/1.1x\r\n\r\n"} {
		c := dialRaw(t, s.base)
		c.send(head)
		resp, body := c.read("GET")
		if resp.StatusCode != 400 || !strings.Contains(body, "malformed request line") {
			t.Errorf("%q: %d %q", head, resp.StatusCode, body)
		}
	}
}

func TestServerRefusesAmbiguousLength(t *testing.T) {
	var seen atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen.Add(1) }))
	t.Cleanup(up.Close)
	reg := prometheus.NewPedanticRegistry()
	s := start(t, up.URL, gate.Config{Registerer: reg})
	for _, head := range []string{
		"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n",
		"transfer-encoding: chunked\r\ncontent-LENGTH: 4\r\n",
	} {
		c := dialRaw(t, s.base)
		c.send("POST /upload HTTP/1.1\r\nHost: gate\r\nX-Tenant: acme\r\n" + head + "\r\n5\r\nhello\r\n0\r\n\r\n" +
			"GET /smuggled HTTP/1.1\r\nHost: gate\r\nX-Tenant: acme\r\n\r\n")
		resp, body := c.read("POST")
		if resp.StatusCode != 400 || !resp.Close || !strings.Contains(body, "both Content-Length and Transfer-Encoding") {
			t.Fatalf("%q: %d close=%v %q", head, resp.StatusCode, resp.Close, body)
		}
		if !c.eof() {
			t.Fatalf("%q: the connection stayed open", head)
		}
	}
	if n := seen.Load(); n != 0 {
		t.Fatalf("the upstream got %d requests", n)
	}
	if got := counted(t, reg, "qtop_gate_requests_total", "bad_request"); got != 2 {
		t.Fatalf("bad_request = %v, want 2", got)
	}
}

// A client that leaves in the middle of a streamed answer (an event
// stream) counts client_gone, with either server; before, upstream: the
// proxy's copy ended on the cancelled request and nothing said why.
func TestClientGoneMidStream(t *testing.T) {
	defer gate.SetClientWatchDelay(gate.SetClientWatchDelay(0))
	for _, std := range []bool{false, true} {
		canceled := make(chan struct{})
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: one\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			close(canceled)
		}))
		reg := prometheus.NewPedanticRegistry()
		s := start(t, up.URL, gate.Config{Registerer: reg, StdServer: std})
		c := dialRaw(t, s.base)
		c.send("GET /events HTTP/1.1\r\nHost: gate\r\nX-Tenant: acme\r\n\r\n")
		buf := make([]byte, 1)
		if _, err := c.c.Read(buf); err != nil { // the head has begun: the stream is on
			t.Fatal(err)
		}
		c.c.Close()
		<-canceled
		if err := s.g.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := clientGone(t, reg); got != 1 {
			t.Errorf("std %v: client_gone = %v, want 1", std, got)
		}
		up.Close()
	}
}
