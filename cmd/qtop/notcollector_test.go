package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/qtop-dev/qtop/internal/collector"
)

// expiring is a context whose deadline the test decides: expire ends it
// with context.DeadlineExceeded, as its timer would, once the server has
// the request rather than on the clock.
type expiring struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func (e *expiring) Done() <-chan struct{} { return e.done }

func (e *expiring) Err() error {
	select {
	case <-e.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func (e *expiring) expire() { e.once.Do(func() { close(e.done) }) }

// TestOnceSilentServer: qtop --once at an address where a server accepts
// the connection and the request but never answers says so — it may not
// be a collector, or is overloaded — rather than how to start a collector.
func TestOnceSilentServer(t *testing.T) {
	ctx := &expiring{Context: context.Background(), done: make(chan struct{})}
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		ctx.expire() // the request is here: qtop's deadline passes
		<-release    // silent until the test ends
	}))
	defer srv.Close()
	defer close(release)
	addr := strings.TrimPrefix(srv.URL, "http://")
	var out, errb bytes.Buffer
	code := runContext(ctx, []string{"--once", "--collector", addr}, &out, &errb)
	errOut := errb.String()
	if code != 1 || out.Len() != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errOut)
	}
	for _, want := range []string{"the server at " + addr + " accepted the connection but did not answer GET /v1/live within",
		"may not be a qtop collector", "overloaded", "check that " + addr + " is the collector's address and port"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q: %s", want, errOut)
		}
	}
	if strings.Contains(errOut, "qtop demo") || strings.Contains(errOut, "no collector answers") {
		t.Errorf("stderr says to start a collector where one listens: %s", errOut)
	}
}

// TestOnceWebServer: qtop --once at a web server says what answered
// (status, content type, the page's title) and what to check, not a JSON
// parser's complaint about '<'.
func TestOnceWebServer(t *testing.T) {
	for _, c := range []struct {
		name string
		h    http.HandlerFunc
		want string
	}{
		{"page", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<!DOCTYPE html><html><head><title>Directory listing for /</title></head><body><ul></ul></body></html>\n")
		}, `answered GET /v1/live with 200 OK and text/html ("Directory listing for /"), not a qtop collector's JSON`},
		{"404", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, "<html><head><title>Error response</title></head><body>Error code: 404</body></html>\n")
		}, `answered GET /v1/live with 404 Not Found and text/html ("Error response"), not a qtop collector's JSON`},
		{"empty", func(w http.ResponseWriter, _ *http.Request) {}, "answered GET /v1/live with 200 OK and an empty body"},
		{"other JSON", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"status":"UP"}`)
		}, "answered GET /v1/live with JSON of another shape"},
	} {
		srv := httptest.NewServer(c.h)
		addr := strings.TrimPrefix(srv.URL, "http://")
		code, out, errOut := runQtop("--once", "--collector", addr)
		srv.Close()
		if code != 1 || out != "" {
			t.Errorf("%s: exit %d, stdout %q", c.name, code, out)
		}
		for _, want := range []string{"the server at " + addr + " " + c.want, "is the collector's address and port", "7070"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("%s: stderr lacks %q: %s", c.name, want, errOut)
			}
		}
		if strings.Contains(errOut, "invalid character") || strings.Contains(errOut, "<") {
			t.Errorf("%s: stderr quotes the parser or the page: %s", c.name, errOut)
		}
	}
}

// TestOnceWithoutTheReadToken: a collector that wants a read token it was
// not given says so, and qtop says which flag gives it.
func TestOnceWithoutTheReadToken(t *testing.T) {
	srv, err := collector.New(collector.Config{Store: collector.StoreNone, DataDir: t.TempDir(), ReadToken: "the-read-token"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	defer hs.Close()
	code, _, errOut := runQtop("--once", "--collector", ln.Addr().String())
	if code != 1 || !strings.Contains(errOut, "needs the read token") || !strings.Contains(errOut, "qtop reads with --token or QTOP_TOKEN") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if code, out, errOut := runQtop("--once", "--collector", ln.Addr().String(), "--token", "the-read-token"); code != 0 || !strings.Contains(out, "TENANT") {
		t.Fatalf("with the read token: exit %d: %s", code, errOut)
	}
}
