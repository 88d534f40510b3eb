package gate_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/agent"
	"github.com/qtop-dev/qtop/gate"
)

// slowBodyUpstream answers /hold only once release is closed, reading
// the body then, and every other request once its body was read; whole
// counts the bodies of /slow read to their end.
func slowBodyUpstream(t *testing.T, holding chan<- struct{}, release <-chan struct{}, whole *atomic.Int32) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			holding <- struct{}{}
			<-release
		}
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			return
		}
		if r.URL.Path == "/slow" {
			whole.Add(1)
		}
		fmt.Fprint(w, n)
	}))
	t.Cleanup(up.Close)
	return up
}

// TestSlowBodyIsCutOff: a client that stops sending its request body
// gets 408 after Config.BodyTimeout and gives its admission slot back,
// whether the gate's own server reads the body (small, known length) or
// net/http's does (large, chunked, every body with StdServer). A body
// the upstream is slow to take is not cut off: only waits for the client
// count.
func TestSlowBodyIsCutOff(t *testing.T) {
	heads := map[string]string{
		"small":   "Content-Length: 1000\r\n",
		"large":   "Content-Length: 1000000\r\n",
		"chunked": "Transfer-Encoding: chunked\r\n",
	}
	for _, std := range []bool{false, true} {
		for _, kind := range []string{"small", "large", "chunked"} {
			t.Run(fmt.Sprintf("StdServer=%v/%s", std, kind), func(t *testing.T) {
				holding, release := make(chan struct{}, 1), make(chan struct{})
				var whole atomic.Int32
				up := slowBodyUpstream(t, holding, release, &whole)
				reg := prometheus.NewPedanticRegistry()
				// A second: the patient request's body must not wait that
				// long for its client's next bytes, even on a busy machine.
				s := start(t, up.URL, gate.Config{Registerer: reg, BodyTimeout: time.Second, StdServer: std}, agent.WithSlots(2))
				addr := strings.TrimPrefix(s.base, "http://")

				// A large body the upstream takes only later: the gate
				// waits on the upstream, not on the client, for longer
				// than the body timeout.
				const holdLen = 32 << 20
				held := make(chan string, 1)
				go func() {
					req, _ := http.NewRequest("POST", s.base+"/hold", io.LimitReader(zeros{}, holdLen))
					req.ContentLength = holdLen
					req.Header.Set("X-Tenant", "patient")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						held <- err.Error()
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					held <- fmt.Sprintf("%d %s", resp.StatusCode, b)
				}()
				<-holding

				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				part := "0123456789"
				if kind == "chunked" {
					part = "a\r\n0123456789\r\n"
				}
				io.WriteString(c, "POST /slow HTTP/1.1\r\nHost: gate\r\nX-Tenant: slow\r\n"+heads[kind]+"\r\n"+part)
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusRequestTimeout || !resp.Close || !strings.Contains(string(b), "request body") {
					t.Fatalf("the stalled upload: %d close=%v %q", resp.StatusCode, resp.Close, b)
				}

				close(release)
				if got, want := <-held, "200 "+strconv.Itoa(holdLen); got != want {
					t.Fatalf("the body the upstream took late: %q, want %q", got, want)
				}
				r2, body := get(t, http.DefaultClient, s.base+"/next", "next")
				if r2.StatusCode != 200 {
					t.Fatalf("the next client: %d %q", r2.StatusCode, body)
				}
				if err := s.g.Shutdown(context.Background()); err != nil {
					t.Fatal(err)
				}
				if got := counted(t, reg, "qtop_gate_requests_total", "body_timeout"); got != 1 {
					t.Fatalf("body_timeout = %v, want 1", got)
				}
				if n := whole.Load(); n != 0 {
					t.Fatalf("the upstream read %d stalled bodies to their end", n)
				}
			})
		}
	}
}

// TestSlowBodyIsCutOffH2C: the bound holds for a stream of an h2c
// connection.
func TestSlowBodyIsCutOffH2C(t *testing.T) {
	var whole atomic.Int32
	up := slowBodyUpstream(t, nil, nil, &whole)
	reg := prometheus.NewPedanticRegistry()
	s := start(t, up.URL, gate.Config{Registerer: reg, BodyTimeout: 50 * time.Millisecond})
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	client := &http.Client{Transport: &http.Transport{Protocols: &p}}
	defer client.CloseIdleConnections()
	pr, pw := io.Pipe()
	defer pw.Close()
	go io.WriteString(pw, "0123456789") // then nothing
	req, _ := http.NewRequest("POST", s.base+"/slow", pr)
	req.Header.Set("X-Tenant", "slow")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("HTTP/%d %d %q", resp.ProtoMajor, resp.StatusCode, b)
	}
	if got := counted(t, reg, "qtop_gate_requests_total", "body_timeout"); got != 1 {
		t.Fatalf("body_timeout = %v, want 1", got)
	}
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
