package gate

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// pipeUpstream answers each connection dialled through it with script,
// after reading the request's head; every connection is a net.Pipe, so
// that in a synctest bubble the upstream's silences are fake time.
type pipeUpstream struct {
	script func(c net.Conn)
	dials  atomic.Int32
}

func (u *pipeUpstream) dial(context.Context, string, string) (net.Conn, error) {
	u.dials.Add(1)
	client, server := net.Pipe()
	go func() {
		defer server.Close()
		if _, err := http.ReadRequest(bufio.NewReader(server)); err != nil {
			return
		}
		u.script(server)
	}()
	return client, nil
}

const readTimeout = time.Minute

// readTimeoutClients are the two upstream paths of the gate with the read
// timeout, over u: the gate's own client and net/http's Transport (which
// takes upgrades, large uploads, h2c and https upstreams).
func readTimeoutClients(u *pipeUpstream, idle *atomic.Int32) map[string]http.RoundTripper {
	up, _ := url.Parse("http://upstream.test:80")
	cfg := Config{Upstream: up, Timeout: time.Minute, ReadTimeout: readTimeout, MaxIdleConnsPerHost: 4}
	onIdle := func(*http.Request) { idle.Add(1) }
	tr := newTransport(cfg)
	tr.DialContext = u.dial
	wt := &watchedTransport{Transport: tr, timeout: readTimeout, cutHooks: cutHooks{onIdle: onIdle}}
	h1 := newH1Client(cfg, wt)
	h1.dial = u.dial
	h1.onIdle = onIdle
	return map[string]http.RoundTripper{"own": h1, "std": wt}
}

// TestReadTimeout: an answer whose upstream goes silent after its
// headers is cut off exactly Config.ReadTimeout after the gate began to
// wait, whatever its framing, through either upstream client; one whose
// upstream keeps sending within the timeout, or whose reader (a slow
// client) pauses longer than it, is read whole.
func TestReadTimeout(t *testing.T) {
	// The cases' scripts sleep on the bubble's fake clock, so the table is
	// made inside each bubble; these are its names, in its order.
	names := []string{"silent after part of a known length", "silent event stream",
		"a byte every 59 s", "an event every 59 s", "a reader that pauses 5 min"}
	for i, name := range names {
		for _, path := range []string{"own", "std"} {
			t.Run(path+"/"+name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					head := "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"
					chunked := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
					cases := []struct {
						name   string
						script func(c net.Conn)
						pause  time.Duration // the reader's, after its first read
						want   string        // the body read whole; "" when it is cut off
					}{
						{name: "silent after part of a known length", script: func(c net.Conn) {
							io.WriteString(c, head+"part of it")
							io.Copy(io.Discard, c) // until the gate closes it
						}},
						{name: "silent event stream", script: func(c net.Conn) {
							io.WriteString(c, chunked+"6\r\ndata:0\r\n")
							io.Copy(io.Discard, c)
						}},
						{name: "a byte every 59 s", script: func(c net.Conn) {
							io.WriteString(c, head)
							for range 100 {
								time.Sleep(readTimeout - time.Second) // fake time: the bubble's clock
								c.Write([]byte{'x'})
							}
						}, want: strings.Repeat("x", 100)},
						{name: "an event every 59 s", script: func(c net.Conn) {
							io.WriteString(c, chunked)
							for range 5 {
								time.Sleep(readTimeout - time.Second)
								io.WriteString(c, "1\r\ne\r\n")
							}
							io.WriteString(c, "0\r\n\r\n")
						}, want: "eeeee"},
						{name: "a reader that pauses 5 min", script: func(c net.Conn) {
							io.WriteString(c, chunked+"1\r\na\r\n")
							io.WriteString(c, "1\r\nb\r\n0\r\n\r\n")
						}, pause: 5 * time.Minute, want: "ab"},
					}
					tc := cases[i]
					if tc.name != name {
						t.Fatalf("case %d is %q, want %q", i, tc.name, name)
					}
					var idle atomic.Int32
					u := &pipeUpstream{script: tc.script}
					c := readTimeoutClients(u, &idle)[path]
					defer c.(interface{ CloseIdleConnections() }).CloseIdleConnections()
					req, _ := http.NewRequest("GET", "http://upstream.test/", nil)
					resp, err := c.RoundTrip(req)
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					var got []byte
					buf := make([]byte, 64)
					var waitedFrom time.Time
					for {
						waitedFrom = time.Now()
						n, err := resp.Body.Read(buf)
						got = append(got, buf[:n]...)
						if err == io.EOF {
							break
						}
						if err != nil {
							if tc.want != "" {
								t.Fatalf("cut off after %q: %v", got, err)
							}
							if !errors.Is(err, errUpstreamIdle) {
								t.Fatalf("error %v, want the upstream's silence", err)
							}
							if waited := time.Since(waitedFrom); waited != readTimeout {
								t.Fatalf("cut off after a wait of %v, want %v", waited, readTimeout)
							}
							if idle.Load() != 1 {
								t.Fatalf("%d answers counted as cut off, want 1", idle.Load())
							}
							return
						}
						if tc.pause > 0 && len(got) == 1 {
							time.Sleep(tc.pause) // fake time: a client slow to take the answer
						}
					}
					if tc.want == "" {
						t.Fatalf("read %q whole, want it cut off", got)
					}
					if string(got) != tc.want || idle.Load() != 0 {
						t.Fatalf("read %q (%d cut off), want %q", got, idle.Load(), tc.want)
					}
				})
			})
		}
	}
}

// TestReadTimeoutUpgrade: an upgraded connection (WebSocket) whose
// upstream sends nothing for Config.ReadTimeout is closed, though its
// client keeps writing; one whose upstream answers in time stays open.
func TestReadTimeoutUpgrade(t *testing.T) {
	for _, answers := range []bool{false, true} {
		t.Run(map[bool]string{false: "silent", true: "answering"}[answers], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var idle atomic.Int32
				u := &pipeUpstream{script: func(c net.Conn) {
					io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
					b := make([]byte, 4)
					for {
						if _, err := io.ReadFull(c, b); err != nil {
							return
						}
						if answers {
							c.Write([]byte("pong"))
						}
					}
				}}
				c := readTimeoutClients(u, &idle)["own"] // an upgrade goes to net/http's Transport
				defer c.(interface{ CloseIdleConnections() }).CloseIdleConnections()
				req, _ := http.NewRequest("GET", "http://upstream.test/ws", nil)
				req.Header.Set("Connection", "Upgrade")
				req.Header.Set("Upgrade", "websocket")
				resp, err := c.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				rw, ok := resp.Body.(io.ReadWriteCloser)
				if resp.StatusCode != http.StatusSwitchingProtocols || !ok {
					t.Fatalf("%d, body %T: want 101 and a connection to write to", resp.StatusCode, resp.Body)
				}
				defer rw.Close()
				start := time.Now()
				closedAt := make(chan time.Duration, 1)
				go func() {
					b := make([]byte, 4)
					for {
						if _, err := io.ReadFull(rw, b); err != nil {
							closedAt <- time.Since(start)
							return
						}
					}
				}()
				// The client writes every 30 s for 10 min.
				for range 20 {
					tick := time.NewTimer(30 * time.Second)
					select {
					case at := <-closedAt:
						tick.Stop()
						if answers {
							t.Fatalf("closed after %v though the upstream answered", at)
						}
						if at != readTimeout || idle.Load() != 1 {
							t.Fatalf("closed after %v (%d counted), want %v (1)", at, idle.Load(), readTimeout)
						}
						return
					case <-tick.C:
					}
					if _, err := rw.Write([]byte("ping")); err != nil && answers {
						t.Fatalf("write after %v: %v", time.Since(start), err)
					}
				}
				if !answers {
					t.Fatalf("a silent upstream's connection was open after %v", time.Since(start))
				}
				if idle.Load() != 0 {
					t.Fatalf("%d cut off", idle.Load())
				}
			})
		})
	}
}
