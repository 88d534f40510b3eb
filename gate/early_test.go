package gate

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestH1EarlyAnswer: an upstream that answers 413 from the request's
// headers and closes without reading the body (a small receive buffer, so
// the gate's write of the body fails) still gets its 413 to the client,
// as net/http's Transport passes it: not a 502.
func TestH1EarlyAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.(*net.TCPConn).SetReadBuffer(4096)
			br := bufio.NewReader(c)
			for {
				line, err := br.ReadString('\n')
				if err != nil || line == "\r\n" {
					break
				}
			}
			io.WriteString(c, "HTTP/1.1 413 Request Entity Too Large\r\nContent-Length: 9\r\nConnection: close\r\n\r\ntoo large")
			c.Close() // unread body: the kernel answers the rest with a reset
		}
	}()
	base := "http://" + ln.Addr().String()
	c := newClient(t, base, 5*time.Second)
	for range 20 {
		req, _ := http.NewRequest("POST", base+"/upload", bytes.NewReader(make([]byte, 60<<10)))
		resp, err := c.RoundTrip(req)
		if err != nil {
			t.Fatalf("the upstream's 413 became an error: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "too large") {
			t.Fatalf("%d %q, want the upstream's 413", resp.StatusCode, b)
		}
	}
}
