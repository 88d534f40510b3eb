package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/qtop-dev/qtop/policy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func snap(i int) Snapshot {
	return Snapshot{
		Time:    time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(i) * time.Second),
		Window:  10 * time.Second,
		Source:  SourceDemo,
		Measure: MeasureRU,
		Tenants: []TenantRow{{Tenant: "acme", RUPerSec: float64(i), History: []float64{1, 2}}, {Tenant: OtherTenant}},
	}
}

func TestClientGetAndQuery(t *testing.T) {
	var gotQuery string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotQuery = r.URL.RawQuery
		if r.URL.Path != PathLive {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(snap(7))
	}))
	defer srv.Close()
	c, err := NewClient(strings.TrimPrefix(srv.URL, "http://"), WithMeasure(MeasureDB), WithTop(5))
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Tenants[0].Tenant != "acme" || s.Tenants[0].RUPerSec != 7 || !s.Time.Equal(snap(7).Time) || s.Window != 10*time.Second {
		t.Fatalf("got %+v", s)
	}
	if gotQuery != "by=db&n=5" {
		t.Fatalf("query %q", gotQuery)
	}
}

func TestClientStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, ": keep-alive\n\n")
		fmt.Fprint(w, "event: other\ndata: {}\n\n")
		for i := range 3 {
			b, _ := json.Marshal(snap(i))
			fmt.Fprintf(w, "event: snapshot\ndata: %s\n\n", b)
		}
	}))
	defer srv.Close()
	c, _ := NewClient(srv.URL)
	var got []float64
	err := c.Stream(context.Background(), func(s Snapshot) { got = append(got, s.Tenants[0].RUPerSec) })
	if fmt.Sprint(got) != "[0 1 2]" {
		t.Fatalf("got %v", got)
	}
	if err == nil {
		t.Fatal("a stream that ends must say so")
	}
}

func TestClientStreamCancel(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		b, _ := json.Marshal(snap(1))
		fmt.Fprintf(w, "event: snapshot\ndata: %s\n\n", b)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	c, _ := NewClient(srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	err := c.Stream(ctx, func(Snapshot) { cancel() })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestClientErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case PathPolicy:
			if r.Header.Get("Authorization") != "Bearer good" {
				w.WriteHeader(http.StatusUnauthorized)
				json.NewEncoder(w).Encode(ErrorBody{Error: "bad token"})
				return
			}
			// A throttle to 0 names its rate (the collector refuses one
			// that does not).
			b, _ := io.ReadAll(r.Body)
			var rule policy.Rule
			if err := json.Unmarshal(b, &rule); err != nil || !strings.Contains(string(b), `"ru_per_second":0`) {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			json.NewEncoder(w).Encode(policy.Policy{Version: 2, Rules: []policy.Rule{rule}})
		default:
			fmt.Fprint(w, "{not json")
		}
	}))
	defer srv.Close()
	c, _ := NewClient(srv.URL)
	if _, err := c.Get(context.Background()); !errors.Is(err, ErrProtocol) {
		t.Fatalf("bad JSON: %v", err)
	}
	rule := policy.Rule{ID: "r1", Tenant: "bigcorp", Action: policy.Throttle, Reason: "import", Expires: time.Now().Add(time.Hour)}
	if _, err := c.PostPolicy(context.Background(), rule, "bad"); !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "bad token") {
		t.Fatalf("bad token: %v", err)
	}
	p, err := c.PostPolicy(context.Background(), rule, "good")
	if err != nil || p.Version != 2 || p.Rules[0].Tenant != "bigcorp" {
		t.Fatalf("post: %v %+v", err, p)
	}
	if _, err := NewClient("ftp://x"); !errors.Is(err, ErrProtocol) {
		t.Fatalf("bad base: %v", err)
	}
}

func TestReadEventsMultiline(t *testing.T) {
	in := "data: a\ndata: b\n\nevent: x\ndata:c\n\nevent: y\n\n"
	var got []string
	if err := ReadEvents(strings.NewReader(in), func(e string, d []byte) error {
		got = append(got, e+"="+string(d))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[message=a\nb x=c]" {
		t.Fatalf("got %q", got)
	}
}

func FuzzReadEvents(f *testing.F) {
	f.Add([]byte("event: snapshot\ndata: {}\n\n"))
	f.Add([]byte(": c\n\ndata\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ReadEvents(strings.NewReader(string(b)), func(e string, d []byte) error {
			if strings.Contains(e, "\n") {
				t.Fatalf("event name with newline %q", e)
			}
			return nil
		})
	})
}

// TestReadTokenOnEveryRead: every read of the client carries the read
// token (the freshness view's did not: qtop's key 7 got 401 from a
// collector with a read token).
func TestReadTokenOnEveryRead(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer read" {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(ErrorBody{Error: "needs the read token"})
			return
		}
		switch r.URL.Path {
		case PathFreshness:
			json.NewEncoder(w).Encode(Freshness{})
		default:
			json.NewEncoder(w).Encode(Snapshot{})
		}
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL, WithToken("read"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(context.Background()); err != nil {
		t.Fatalf("live view: %v", err)
	}
	if _, err := c.GetFreshness(context.Background()); err != nil {
		t.Fatalf("freshness view: %v", err)
	}
}

// TestPrintableBidi: bidirectional controls, which reorder what follows
// them on a terminal, print as spaces like the other controls.
func TestPrintableBidi(t *testing.T) {
	for _, in := range []string{"acme\u202egnp.exe", "a\u2066b\u2069", "x\u200fy", "\x1b[2J"} {
		if out := Printable(in); strings.ContainsFunc(out, Unprintable) || len([]rune(out)) != len([]rune(in)) {
			t.Errorf("Printable(%q) = %q", in, out)
		}
	}
	if got := Printable("acme\u202egnp"); got != "acme gnp" {
		t.Errorf("Printable = %q", got)
	}
}
