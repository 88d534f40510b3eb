package gate

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// TestWriteRequest: what writeRequest writes reads back as the same
// request as what Request.Write writes.
func TestWriteRequest(t *testing.T) {
	mk := func(method, url, body string, h map[string][]string) func() *http.Request {
		return func() *http.Request {
			var r io.Reader
			if body != "" {
				r = strings.NewReader(body)
			}
			req, err := http.NewRequest(method, url, r)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range h {
				req.Header[k] = v
			}
			return req
		}
	}
	for name, req := range map[string]func() *http.Request{
		"get":         mk("GET", "http://up:3000/a/b?x=1&y=%20", "", map[string][]string{"X-Tenant": {"acme"}, "Accept": {"a", "b"}}),
		"head":        mk("HEAD", "http://up:3000/", "", nil),
		"no agent":    mk("GET", "http://up:3000/", "", map[string][]string{"User-Agent": {""}}),
		"agent":       mk("GET", "http://up:3000/", "", map[string][]string{"User-Agent": {"curl/8", "second"}}),
		"post":        mk("POST", "http://up:3000/orders", `{"n":1}`, map[string][]string{"Content-Type": {"application/json"}}),
		"empty post":  mk("POST", "http://up:3000/orders", "", nil),
		"delete":      mk("DELETE", "http://up:3000/orders/1", "", nil),
		"line break":  mk("GET", "http://up:3000/", "", map[string][]string{"X-Bad": {"a\r\nX-Evil: 1"}}),
		"stray count": mk("GET", "http://up:3000/", "", map[string][]string{"Content-Length": {"7"}, "Transfer-Encoding": {"chunked"}}),
		"close": func() *http.Request {
			r := mk("GET", "http://up:3000/", "", nil)()
			r.Close = true
			return r
		},
		"host": func() *http.Request {
			r := mk("GET", "http://up:3000/", "", nil)()
			r.Host = "shop.example"
			return r
		},
	} {
		var want, got bytes.Buffer
		if err := req().Write(&want); err != nil {
			t.Fatal(err)
		}
		bw := bufio.NewWriter(&got)
		if err := writeRequest(bw, req()); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		bw.Flush()
		w, g := readBack(t, want.String()), readBack(t, got.String())
		if !reflect.DeepEqual(w, g) {
			t.Errorf("%s:\n got %q\nwant %q", name, got.String(), want.String())
		}
	}
}

type readRequest struct {
	Method, URI, Host, Body string
	Header                  http.Header
	Length                  int64
	Close                   bool
}

func readBack(t *testing.T, wire string) readRequest {
	t.Helper()
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(wire)))
	if err != nil {
		t.Fatalf("%q: %v", wire, err)
	}
	b, _ := io.ReadAll(req.Body)
	return readRequest{req.Method, req.RequestURI, req.Host, string(b), req.Header, req.ContentLength, req.Close}
}
