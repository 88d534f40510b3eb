package collector

import (
	"net/http"
	"testing"

	"github.com/qtop-dev/qtop/api"
)

// TestHygieneReadEndpointsMethods: the read endpoints answer GET and
// HEAD, and every other method 405 with an Allow header.
func TestHygieneReadEndpointsMethods(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	h := f.s.Handler()
	paths := []string{api.PathLive, api.PathReport, api.PathHistory + "?tenant=acme&minutes=5", api.PathAudit, api.PathFreshness}
	for _, path := range paths {
		for _, m := range []string{http.MethodGet, http.MethodHead} {
			if w := hygieneDo(h, m, path, f.token, nil); w.Code != http.StatusOK {
				t.Errorf("%s %s: %d %s", m, path, w.Code, w.Body)
			}
		}
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodOptions, http.MethodPatch} {
			w := hygieneDo(h, m, path, f.token, nil)
			if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %d, Allow %q: want 405 and Allow GET, HEAD", m, path, w.Code, w.Header().Get("Allow"))
			}
		}
	}
}

// TestHygieneProbeAndStreamMethods: the probes, /metrics and the live
// stream answer other methods than GET and HEAD 405 (they answered 200).
func TestHygieneProbeAndStreamMethods(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	h := f.s.Handler()
	for _, path := range []string{"/healthz", "/readyz", "/metrics", api.PathStream} {
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
			if w := hygieneDo(h, m, path, f.token, nil); w.Code != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: %d, want 405", m, path, w.Code)
			}
		}
	}
	if w := hygieneDo(h, http.MethodGet, "/healthz", "", nil); w.Code != http.StatusOK {
		t.Errorf("GET /healthz: %d", w.Code)
	}
}
