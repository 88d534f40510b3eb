package collector

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
)

// TestStreamSharedAndCapped: every client of the same second gets the
// same encoded event (encoded once, not once per client), and a client
// beyond maxStreams is refused with 503 and a reason.
func TestStreamSharedAndCapped(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	srv := httptest.NewServer(f.s.Handler())
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var bodies []*bufio.Reader
	var resps []*http.Response
	defer func() {
		cancel()
		for _, r := range resps {
			r.Body.Close()
		}
	}()
	for i := range maxStreams {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+api.PathStream, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resps = append(resps, resp)
		if resp.StatusCode != 200 {
			t.Fatalf("stream %d: %d", i, resp.StatusCode)
		}
		bodies = append(bodies, bufio.NewReader(resp.Body))
	}
	for i, b := range bodies {
		line, err := b.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "event: snapshot") {
			t.Fatalf("stream %d: %q %v", i, line, err)
		}
	}
	if n := f.s.streams.encoded.Load(); n != 1 {
		t.Fatalf("%d clients at one instant: snapshot encoded %d times, want once", maxStreams, n)
	}
	resp, err := srv.Client().Get(srv.URL + api.PathStream)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	bufio.NewReader(resp.Body).WriteTo(&sb)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(sb.String(), "too many live streams") || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("stream beyond the cap: %d %s", resp.StatusCode, sb.String())
	}
}

// The fleet's stream (with peers) is under the same cap as the local one.
func TestFleetStreamCapped(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Peers = []string{"127.0.0.1:1"} })
	defer f.stop()
	srv := httptest.NewServer(f.s.Handler())
	defer srv.Close()
	f.s.streams.n.Store(maxStreams) // every place taken
	c := srv.Client()
	c.Timeout = 10 * time.Second // a stream served would not end
	resp, err := c.Get(srv.URL + api.PathStream)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	bufio.NewReader(resp.Body).WriteTo(&sb)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(sb.String(), "too many live streams") {
		t.Fatalf("fleet stream beyond the cap: %d %s", resp.StatusCode, sb.String())
	}
	f.s.streams.n.Store(0)
}
