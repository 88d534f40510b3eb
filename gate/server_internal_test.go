package gate

import (
	"bufio"
	"bytes"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// takenHeads are heads the server answers itself.
var takenHeads = []string{
	"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /item/42?x=1&y=%20 HTTP/1.1\r\nHost: example.com:8080\r\nX-Tenant: acme\r\nX-Tier: T1\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n",
	"POST /orders HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Type: application/json\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\ncookie: a=1\r\nCOOKIE: b=2\r\nx-custom-thing: v\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, close\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX-Empty:\r\nX-Spaces: \t v \t\r\n\r\n",
	"HEAD /h HTTP/1.1\r\nHost: [::1]:80\r\n\r\n",
}

// refusedHeads are heads the server leaves to net/http.
var refusedHeads = []string{
	"GET / HTTP/1.0\r\nHost: a\r\n\r\n",
	"GET / HTTP/1.1\nHost: a\n\n",
	"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
	"GET / HTTP/1.1\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX-Folded: a\r\n b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nBad Name: v\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n",
	"GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n",
	"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n",
	"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n",
	"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 65537\r\n\r\n",
	"GET /%zz HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
}

// FuzzParseHead holds the server's head parser to net/http's: a head it
// takes, net/http takes too, and reads to the same request.
func FuzzParseHead(f *testing.F) {
	for _, s := range append(takenHeads, refusedHeads...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n := headEnd(b)
		if n == 0 {
			return
		}
		h, ok := parseHead(b[:n])
		if !ok {
			return
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b[:n])))
		if err != nil {
			t.Fatalf("the server takes %q, net/http refuses it: %v", b[:n], err)
		}
		if req.Method != h.method || req.RequestURI != h.target || req.Host != h.host ||
			req.URL.String() != h.url.String() || req.Close != h.close {
			t.Fatalf("%q: server %q %q %q %v, net/http %q %q %q %v", b[:n], h.method, h.target, h.host, h.close,
				req.Method, req.RequestURI, req.Host, req.Close)
		}
		if req.ContentLength != h.contentLength && !(req.ContentLength == -1 && h.contentLength == 0) {
			t.Fatalf("%q: Content-Length %d, net/http %d", b[:n], h.contentLength, req.ContentLength)
		}
		if !maps.EqualFunc(map[string][]string(req.Header), map[string][]string(h.header), slices.Equal) {
			t.Fatalf("%q: header %v, net/http %v", b[:n], h.header, req.Header)
		}
	})
}

// TestParseHeadRefuses: what the server leaves to net/http.
func TestParseHeadRefuses(t *testing.T) {
	for _, s := range refusedHeads {
		if n := headEnd([]byte(s)); n > 0 {
			if _, ok := parseHead([]byte(s[:n])); ok {
				t.Errorf("parseHead takes %q", s)
			}
		}
	}
	for _, s := range takenHeads {
		if _, ok := parseHead([]byte(s)); !ok {
			t.Errorf("parseHead refuses %q", s)
		}
	}
}

// TestHeadEnd finds the empty line ending a head, with CRLF or bare LF.
func TestHeadEnd(t *testing.T) {
	for s, want := range map[string]int{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\nbody": 27,
		"GET / HTTP/1.1\r\nHost: a\r\n\r":       0,
		"GET / HTTP/1.1\nHost: a\n\nbody":       24,
		"GET / HTTP/1.1\r\nHost: a\r\n":         0,
		"\n\n":                                  2,
		"":                                      0,
	} {
		if got := headEnd([]byte(s)); got != want {
			t.Errorf("headEnd(%q) = %d, want %d", s, got, want)
		}
	}
}

// TestCanonicalKey agrees with net/http's canonical form.
func TestCanonicalKey(t *testing.T) {
	for _, k := range []string{"x-tenant", "X-TENANT", "X-Tenant", "content-length", "a", "x-b-c", "X_Y", "www-authenticate", "Accept"} {
		if got, want := canonicalKey(k), http.CanonicalHeaderKey(k); got != want {
			t.Errorf("canonicalKey(%q) = %q, want %q", k, got, want)
		}
	}
	k := strings.ToLower("X-Tenant")
	if n := testing.AllocsPerRun(100, func() { canonicalKey(k) }); n != 0 {
		t.Errorf("canonicalKey allocates %v times for a common key", n)
	}
}
