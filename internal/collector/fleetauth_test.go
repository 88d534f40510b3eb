package collector

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/store"
)

// With peers, /v1/live and /v1/live/stream serve the fleet's view through
// a route of their own: it takes the read credential as the collector's
// own view does (it served anyone before), and only GET and HEAD.
func TestFleetViewNeedsTheReadToken(t *testing.T) {
	clk := &clock{t: t0}
	ms := newMemStore()
	s, err := New(Config{Store: "duckdb://unused.duckdb", OpenStore: func(string) (store.Store, error) { return ms, nil },
		DataDir: t.TempDir(), Writer: "w", Token: "tok", ReadToken: "rtok", Registerer: prometheus.NewRegistry(), Now: clk.Now, Listen: "127.0.0.1:0",
		FleetConfig: FleetConfig{Peers: []string{"127.0.0.1:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	h := s.Handler()
	// Done at once: a stream served by mistake ends after its first event.
	done, cancel := context.WithCancel(t.Context())
	cancel()
	get := func(method, path, token string) int {
		req := httptest.NewRequest(method, path, nil).WithContext(done)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	for _, path := range []string{api.PathLive, api.PathStream, api.PathLive + "?scope=local", api.PathStream + "?scope=local"} {
		for _, token := range []string{"", "tok", "wrong"} {
			if code := get(http.MethodGet, path, token); code != http.StatusUnauthorized {
				t.Errorf("GET %s with token %q: %d, want 401", path, token, code)
			}
		}
	}
	if code := get(http.MethodGet, api.PathLive, "rtok"); code != http.StatusOK {
		t.Errorf("GET %s with the read token: %d", api.PathLive, code)
	}
	if code := get(http.MethodPost, api.PathLive, "rtok"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST %s: %d, want 405", api.PathLive, code)
	}
}
