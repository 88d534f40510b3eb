package gate

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
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

// FuzzWriteRequest: for any path, host and header value, writeRequest
// writes what reads back as Request.Write's request, or fails where it
// fails.
func FuzzWriteRequest(f *testing.F) {
	f.Add("/a?b=c", "up:3000", "value", "body")
	f.Add("/", "shop.example", " padded ", "")
	f.Add("/x", "[::1]:80", "a\r\nX-Evil: 1", "")
	f.Add("/%zz", "bad host", "\x00", "x")
	f.Fuzz(func(t *testing.T, path, host, value, body string) {
		mk := func() *http.Request {
			req, err := http.NewRequest("POST", "http://up:3000/", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.URL.Path = path
			req.Host = host
			req.Header.Set("User-Agent", "")
			req.Header["X-Value"] = []string{value}
			return req
		}
		var want, got bytes.Buffer
		werr := mk().Write(&want)
		bw := bufio.NewWriter(&got)
		gerr := writeRequest(bw, mk())
		bw.Flush()
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("Request.Write: %v, writeRequest: %v", werr, gerr)
		}
		if werr != nil {
			return
		}
		w, errW := http.ReadRequest(bufio.NewReader(&want))
		g, errG := http.ReadRequest(bufio.NewReader(&got))
		if (errW == nil) != (errG == nil) {
			t.Fatalf("read back: %v / %v\n got %q\nwant %q", errG, errW, got.String(), want.String())
		}
		if errW != nil {
			return
		}
		wb, _ := io.ReadAll(w.Body)
		gb, _ := io.ReadAll(g.Body)
		a := readRequest{w.Method, w.RequestURI, w.Host, string(wb), w.Header, w.ContentLength, w.Close}
		b := readRequest{g.Method, g.RequestURI, g.Host, string(gb), g.Header, g.ContentLength, g.Close}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("\n got %+v\nwant %+v", b, a)
		}
	})
}

// TestWriteRequestBodyError: an error reading the client's body is told
// from one writing to the upstream, so that no upstream answer is waited
// for; a body shorter than its length is neither.
func TestWriteRequestBodyError(t *testing.T) {
	broken := errors.New("connection reset by peer")
	req, _ := http.NewRequest("POST", "http://up/x", io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(broken)))
	req.ContentLength = 10
	err := writeRequest(bufio.NewWriter(io.Discard), req)
	if be := (bodyReadError{}); !errors.As(err, &be) || !errors.Is(err, broken) {
		t.Fatalf("a broken body: %v", err)
	}
	req, _ = http.NewRequest("POST", "http://up/x", strings.NewReader("abc"))
	req.ContentLength = 10
	err = writeRequest(bufio.NewWriter(io.Discard), req)
	if be := (bodyReadError{}); err == nil || errors.As(err, &be) {
		t.Fatalf("a short body: %v", err)
	}
	req, _ = http.NewRequest("POST", "http://up/x", strings.NewReader(strings.Repeat("x", 8192)))
	err = writeRequest(bufio.NewWriterSize(failWriter{broken}, 16), req)
	if be := (bodyReadError{}); !errors.Is(err, broken) || errors.As(err, &be) {
		t.Fatalf("a broken upstream: %v", err)
	}
}

type failWriter struct{ err error }

func (w failWriter) Write([]byte) (int, error) { return 0, w.err }
