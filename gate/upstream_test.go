package gate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qtop-dev/qtop/agent"
)

// counted is a loopback upstream that counts the connections made to it.
type counted struct {
	*httptest.Server
	conns atomic.Int32
}

func newCounted(t *testing.T, h http.HandlerFunc) *counted {
	t.Helper()
	u := &counted{Server: httptest.NewUnstartedServer(h)}
	u.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			u.conns.Add(1)
		}
	}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

// newClient is the gate's upstream client for base, net/http's Transport
// behind it.
func newClient(t *testing.T, base string, timeout time.Duration) *h1Client {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Upstream: u, Timeout: timeout, DialTimeout: 5 * time.Second, MaxIdleConnsPerHost: 4}
	c := newH1Client(cfg, newTransport(cfg))
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// roundTrip sends method to base+path through c and reads the body whole.
func roundTrip(t *testing.T, c http.RoundTripper, method, url string, body io.Reader) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s %s: body: %v", method, url, err)
	}
	return resp, string(b)
}

func (c *h1Client) idle() int {
	c.pool.mu.Lock()
	defer c.pool.mu.Unlock()
	return len(c.pool.idle)
}

// TestH1KeepAlive: requests one after the other share one connection,
// whatever the framing of their answers: fixed length, chunked, HEAD,
// 204, 304, and small bodies sent up.
func TestH1KeepAlive(t *testing.T) {
	up := newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chunked":
			io.WriteString(w, "one,")
			w.(http.Flusher).Flush()
			io.WriteString(w, "two")
		case "/head":
			w.Header().Set("Content-Length", "100")
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/304":
			w.WriteHeader(http.StatusNotModified)
		case "/echo":
			io.Copy(w, r.Body)
		default:
			io.WriteString(w, "fixed")
		}
	})
	c := newClient(t, up.URL, 5*time.Second)
	for _, s := range []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"GET", "/fixed", "", 200, "fixed"},
		{"GET", "/chunked", "", 200, "one,two"},
		{"HEAD", "/head", "", 200, ""},
		{"GET", "/204", "", 204, ""},
		{"GET", "/304", "", 304, ""},
		{"POST", "/echo", "sent up", 200, "sent up"},
		{"GET", "/fixed", "", 200, "fixed"},
	} {
		var body io.Reader
		if s.body != "" {
			body = strings.NewReader(s.body)
		}
		resp, got := roundTrip(t, c, s.method, up.URL+s.path, body)
		if resp.StatusCode != s.code || got != s.want {
			t.Errorf("%s %s: %d %q, want %d %q", s.method, s.path, resp.StatusCode, got, s.code, s.want)
		}
		if c.idle() != 1 {
			t.Errorf("%s %s: %d idle connections after the answer, want 1", s.method, s.path, c.idle())
		}
	}
	if n := up.conns.Load(); n != 1 {
		t.Fatalf("%d connections to the upstream, want 1", n)
	}
}

// TestH1ConnectionNotReused: an answer with Connection: close, one read
// until the upstream closes (no length), and a body the client closed
// early each leave no connection to reuse.
func TestH1ConnectionNotReused(t *testing.T) {
	up := newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/close":
			w.Header().Set("Connection", "close")
			io.WriteString(w, "bye")
		case "/big":
			io.WriteString(w, strings.Repeat("x", 64<<10))
		}
	})
	c := newClient(t, up.URL, 5*time.Second)
	if resp, body := roundTrip(t, c, "GET", up.URL+"/close", nil); !resp.Close || body != "bye" {
		t.Fatalf("close: Close=%v %q", resp.Close, body)
	}
	if c.idle() != 0 {
		t.Fatalf("Connection: close: %d idle", c.idle())
	}
	req, _ := http.NewRequest("GET", up.URL+"/big", nil)
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resp.Body.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := resp.Body.Read(make([]byte, 10)); !errors.Is(err, http.ErrBodyReadAfterClose) {
		t.Fatalf("read after close: %v", err)
	}
	if c.idle() != 0 {
		t.Fatalf("body closed early: %d idle", c.idle())
	}
	roundTrip(t, c, "GET", up.URL+"/big", nil)
	if n := up.conns.Load(); n != 3 {
		t.Fatalf("%d connections, want 3 (none reused)", n)
	}
}

// rawUpstream answers each connection's requests with answer(i), i
// counting requests over all connections, and closes the connection
// after it unless keep(i). closed receives when it has closed one.
func rawUpstream(t *testing.T, answer func(i int) string, keep func(i int) bool) (base string, conns *atomic.Int32, closed <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns = new(atomic.Int32)
	var n atomic.Int32
	cl := make(chan struct{}, 100)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { nc.Close(); cl <- struct{}{} }()
				br := bufio.NewReader(nc)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					i := int(n.Add(1)) - 1
					if _, err := io.WriteString(nc, answer(i)); err != nil || !keep(i) {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String(), conns, cl
}

// TestH1ReadUntilClose: an answer without Content-Length or chunking ends
// when the upstream closes the connection.
func TestH1ReadUntilClose(t *testing.T) {
	base, conns, _ := rawUpstream(t, func(int) string { return "HTTP/1.1 200 OK\r\n\r\nall of it" },
		func(int) bool { return false })
	c := newClient(t, base, 5*time.Second)
	for range 2 {
		resp, body := roundTrip(t, c, "GET", base+"/", nil)
		if resp.ContentLength != -1 || body != "all of it" {
			t.Fatalf("%d %q", resp.ContentLength, body)
		}
	}
	if c.idle() != 0 || conns.Load() != 2 {
		t.Fatalf("%d idle, %d connections", c.idle(), conns.Load())
	}
}

// TestH1StaleConnection: the upstream closes each kept-alive connection
// after one answer though it announced keep-alive. A GET on such a
// connection is sent again on a new one; a POST is not sent on it at all
// (the connection is seen closed before), so both succeed.
func TestH1StaleConnection(t *testing.T) {
	base, conns, closed := rawUpstream(t, func(int) string { return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" },
		func(int) bool { return false })
	c := newClient(t, base, 5*time.Second)
	for i, m := range []string{"GET", "GET", "POST", "HEAD", "POST"} {
		if i > 0 {
			<-closed // the kept-alive connection is closed now
		}
		var body io.Reader
		if m == "POST" {
			body = strings.NewReader("order")
		}
		resp, got := roundTrip(t, c, m, base+"/", body)
		if resp.StatusCode != 200 || (m != "HEAD" && got != "ok") {
			t.Fatalf("request %d (%s): %d %q", i, m, resp.StatusCode, got)
		}
	}
	if n := conns.Load(); n != 5 {
		t.Fatalf("%d connections for 5 requests", n)
	}
}

// TestH1NoRetryAfterAnswerStarted: a connection that breaks in the middle
// of the answer is not retried: the client gets the error.
func TestH1NoRetryAfterAnswerStarted(t *testing.T) {
	base, conns, _ := rawUpstream(t, func(i int) string {
		if i == 0 {
			return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
		}
		return "HTTP/1.1 200 O"
	}, func(i int) bool { return i == 0 })
	c := newClient(t, base, 5*time.Second)
	roundTrip(t, c, "GET", base+"/", nil)
	req, _ := http.NewRequest("GET", base+"/", nil)
	if _, err := c.RoundTrip(req); err == nil || errors.Is(err, errNoAnswer) {
		t.Fatalf("broken answer: %v", err)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections, want 1 (no retry)", n)
	}
}

// TestH1Timeout: an upstream that does not answer in time gives a timeout
// error (504 at the gate), not retried even on a kept-alive connection.
func TestH1Timeout(t *testing.T) {
	var n atomic.Int32
	up := newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) > 1 {
			<-r.Context().Done()
			return
		}
		io.WriteString(w, "quick")
	})
	c := newClient(t, up.URL, 50*time.Millisecond)
	roundTrip(t, c, "GET", up.URL+"/", nil)
	req, _ := http.NewRequest("GET", up.URL+"/", nil)
	_, err := c.RoundTrip(req)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("want a timeout, got %v", err)
	}
	if n.Load() != 2 || up.conns.Load() != 1 {
		t.Fatalf("%d requests on %d connections, want 2 on 1", n.Load(), up.conns.Load())
	}
}

// TestH1ClientLeaves: cancelling the request's context while the upstream
// thinks ends the round trip with the context's error.
func TestH1ClientLeaves(t *testing.T) {
	arrived := make(chan struct{})
	up := newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
	})
	c := newClient(t, up.URL, time.Minute)
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-arrived; cancel() }()
	req, _ := http.NewRequestWithContext(ctx, "GET", up.URL+"/", nil)
	if _, err := c.RoundTrip(req); !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
}

// TestH1Fallback: what the client does not write itself still reaches the
// upstream through net/http: a chunked upload, one over 64 KiB, and one
// that expects 100-continue.
func TestH1Fallback(t *testing.T) {
	up := newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%s|%s|%d", r.Header.Get("Expect"), strings.Join(r.TransferEncoding, ","), n)
	})
	c := newClient(t, up.URL, 5*time.Second)
	big := strings.Repeat("y", maxDirectBody+1)
	for _, s := range []struct {
		name   string
		req    func() *http.Request
		direct bool
		want   string
	}{
		{"chunked", func() *http.Request {
			r, _ := http.NewRequest("POST", up.URL+"/", io.MultiReader(strings.NewReader("abc")))
			return r
		}, false, "|chunked|3"},
		{"large", func() *http.Request {
			r, _ := http.NewRequest("POST", up.URL+"/", strings.NewReader(big))
			return r
		}, false, "|" + "|" + fmt.Sprint(maxDirectBody+1)},
		{"expect", func() *http.Request {
			r, _ := http.NewRequest("POST", up.URL+"/", strings.NewReader("abc"))
			r.Header.Set("Expect", "100-continue")
			return r
		}, false, "100-continue||3"},
		{"small", func() *http.Request {
			r, _ := http.NewRequest("POST", up.URL+"/", strings.NewReader("abc"))
			return r
		}, true, "||3"},
	} {
		req := s.req()
		if c.direct(req) != s.direct {
			t.Errorf("%s: direct=%v", s.name, !s.direct)
		}
		resp, err := c.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != s.want {
			t.Errorf("%s: %d %q, want %q", s.name, resp.StatusCode, b, s.want)
		}
	}
}

// TestPoolSweepsIdle: a connection idle for idleConnTimeout is closed,
// the newest is taken first, a full pool closes what comes back, and
// close closes everything, then and later.
func TestPoolSweepsIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &connPool{max: 3, idleTimeout: 90 * time.Second}
		var peers []net.Conn
		conn := func() *h1Conn {
			a, b := net.Pipe()
			peers = append(peers, b)
			return newH1Conn(a)
		}
		isClosed := func(i int) bool {
			peers[i].SetReadDeadline(time.Now())
			_, err := peers[i].Read(make([]byte, 1))
			return errors.Is(err, io.EOF)
		}
		c0, c1, c2, c3 := conn(), conn(), conn(), conn()
		p.put(c0) // t0
		time.Sleep(30 * time.Second)
		p.put(c1) // t0+30s
		time.Sleep(30 * time.Second)
		p.put(c2) // t0+60s
		p.put(c3) // full
		if !isClosed(3) || isClosed(0) {
			t.Fatal("the pool is full: the fourth connection is closed, not the others")
		}
		time.Sleep(30 * time.Second) // t0+90s
		synctest.Wait()
		if !isClosed(0) || isClosed(1) || isClosed(2) {
			t.Fatalf("at 90 s only the first connection is closed: %v %v %v", isClosed(0), isClosed(1), isClosed(2))
		}
		if got := p.get(); got != c2 {
			t.Fatal("get does not take the newest")
		}
		time.Sleep(30 * time.Second) // t0+120s
		synctest.Wait()
		if !isClosed(1) || p.get() != nil {
			t.Fatal("at 120 s the second connection is closed and the pool empty")
		}
		p.put(c2)
		p.close()
		if !isClosed(2) {
			t.Fatal("close leaves an idle connection open")
		}
		c4 := conn()
		p.put(c4)
		if !isClosed(4) {
			t.Fatal("a connection put back after close stays open")
		}
	})
}

// TestNewPicksClient: the gate's own client for http:// upstreams, net/
// http's Transport for h2c, https and with StdTransport.
func TestNewPicksClient(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want bool
	}{
		{Config{Upstream: &url.URL{Scheme: "http", Host: "127.0.0.1:3000"}}, true},
		{Config{Upstream: &url.URL{Scheme: "http", Host: "127.0.0.1:3000"}, StdTransport: true}, false},
		{Config{Upstream: &url.URL{Scheme: "http", Host: "127.0.0.1:3000"}, H2CUpstream: true}, false},
		{Config{Upstream: &url.URL{Scheme: "https", Host: "127.0.0.1:3000"}}, false},
	} {
		a, err := agent.New(agent.WithService("pick"), agent.WithTenant(agent.FromHeader("X-Tenant", "")))
		if err != nil {
			t.Fatal(err)
		}
		g, err := New(a, c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, own := g.tr.(*h1Client)
		g.Shutdown(t.Context())
		if own != c.want {
			t.Errorf("%+v: own client %v, want %v", c.cfg, own, c.want)
		}
	}
}

// TestH1UnaskedBytesCloseTheConnection: an upstream that sends bytes on a
// kept-alive connection after its answer ended (a body after a 204 or a
// HEAD answer, a second answer) does not get them read as the answer to
// the next request, another client's: the connection is closed and the
// next request gets its own answer on a new one.
func TestH1UnaskedBytesCloseTheConnection(t *testing.T) {
	for _, tc := range []struct{ name, method, answer, late string }{
		{"a second answer after a 204", "GET", "HTTP/1.1 204 No Content\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nINJECTED"},
		{"a body after a HEAD answer", "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "HELLO"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			answered, sendLate := make(chan struct{}), make(chan struct{})
			var conns atomic.Int32
			var wg sync.WaitGroup
			t.Cleanup(func() { ln.Close(); wg.Wait() })
			wg.Go(func() {
				for {
					nc, err := ln.Accept()
					if err != nil {
						return
					}
					n := conns.Add(1)
					wg.Go(func() {
						defer nc.Close()
						br := bufio.NewReader(nc)
						for first := n == 1; ; first = false {
							if _, err := http.ReadRequest(br); err != nil {
								return
							}
							if !first {
								io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nmine")
								continue
							}
							io.WriteString(nc, tc.answer)
							close(answered)
							<-sendLate
							io.WriteString(nc, tc.late)
						}
					})
				}
			})
			base := "http://" + ln.Addr().String()
			c := newClient(t, base, 5*time.Second)
			if resp, _ := roundTrip(t, c, tc.method, base+"/first", nil); resp.StatusCode/100 != 2 {
				t.Fatalf("first: %d", resp.StatusCode)
			}
			<-answered
			if c.idle() != 1 {
				t.Fatalf("%d idle connections after the first answer, want 1", c.idle())
			}
			close(sendLate)
			// Wait until the late bytes have reached the idle connection.
			deadline := time.Now().Add(10 * time.Second)
			for {
				c.pool.mu.Lock()
				pc := c.pool.idle[0]
				c.pool.mu.Unlock()
				if !pc.open() {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the late bytes never arrived")
				}
				runtime.Gosched()
			}
			resp, got := roundTrip(t, c, "GET", base+"/victim", nil)
			if resp.StatusCode != 200 || got != "mine" || conns.Load() != 2 {
				t.Fatalf("the next request got %d %q on %d connections, want its own answer on a new one", resp.StatusCode, got, conns.Load())
			}
		})
	}
}
