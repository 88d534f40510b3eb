package collector

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The collector's own registry serves the Go runtime's and the process's
// series and qtop_build_info beside its own, and OpenMetrics when asked.
func TestMetricsExposition(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Registerer, c.Gatherer = nil, nil }) // its own registry
	defer f.stop()
	h := f.s.Handler()
	get := func(accept string) (string, string) {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		b, _ := io.ReadAll(rec.Body)
		return rec.Header().Get("Content-Type"), string(b)
	}
	_, text := get("")
	for _, want := range []string{"go_goroutines ", "process_resident_memory_bytes ", "qtop_build_info{", "qtop_collector_reports_total "} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	ct, om := get("application/openmetrics-text; version=1.0.0")
	if !strings.HasPrefix(ct, "application/openmetrics-text") || !strings.HasSuffix(strings.TrimSpace(om), "# EOF") {
		t.Errorf("OpenMetrics asked: Content-Type %q, ends %q", ct, om[max(0, len(om)-20):])
	}
}
