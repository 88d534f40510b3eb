package agent

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/qtop-dev/qtop/report"
)

// TestTokenFile: the agent reads its report token from a file and again
// after a rotation renames a new one into place; the collector switches
// at once, and the report it refused meanwhile is kept and sent.
func TestTokenFile(t *testing.T) {
	var mu sync.Mutex
	want, got := "one", []string(nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+want {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		got = append(got, want)
		b, _ := report.EncodeReply(report.Reply{Accepted: true})
		w.Header().Set("Content-Type", report.ReplyContentType)
		w.Write(b)
	}))
	defer srv.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "report.token")
	rotate := func(tok string) {
		t.Helper()
		if err := os.WriteFile(file+".new", []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(file+".new", file); err != nil {
			t.Fatal(err)
		}
	}
	rotate("one")
	a, err := New(WithCollector(srv.URL, "from-the-option"), WithTokenFile(file), WithReportQueue(5))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(t.Context())
	if err := a.Reporter().ForceFlush(t.Context()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	want = "two" // the collector first
	mu.Unlock()
	rotate("two")
	if err := a.Reporter().ForceFlush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if a.Reporter().Dropped() != 0 {
		t.Errorf("%d reports dropped", a.Reporter().Dropped())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) < 2 || got[0] != "one" || got[len(got)-1] != "two" {
		t.Errorf("tokens taken %v", got)
	}
}

func TestTokenFileAndQueueErrors(t *testing.T) {
	for _, o := range []Option{WithTokenFile(filepath.Join(t.TempDir(), "none")), WithReportQueue(0)} {
		a, err := New(WithCollector("http://127.0.0.1:1", ""), o)
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%v", err)
		}
		if a != nil {
			a.Shutdown(t.Context())
		}
	}
}
